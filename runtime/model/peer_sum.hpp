// The decentralised gradient sum of one layer among its holders (docs/MODEL.md, "The exact
// sum"), as a state machine that only says what to send: the caller (a device actor) moves
// the messages, in one process or between nodes. The layer's gradients are one flat vector
// cut into `holders` chunks; holder k owns chunk k. Every holder sends each owner its partial
// sums' slices of that owner's chunk (scatter), the owner adds them in the exact sum's tree,
// and sends its summed chunk to every holder (gather). Each holder then has the whole sum,
// bit for bit what tree_sum gives in one place; it has sent and received about 2x the layer.
#pragma once

#include <cstdint>
#include <vector>

#include "model/api.hpp"

namespace dynapar::model {

struct chunk_msg {
  bool gather = false;  // false: partial sums' slices for the owner; true: the owner's summed chunk
  int from = 0;         // the sender's rank
  // Scatter: the sender's partial sums (level, index), each one tensor, the slice of the
  // receiver's chunk. Gather: one part, the summed chunk.
  std::vector<grad_part> parts;
};

struct chunk_send {
  int to = 0;  // rank
  chunk_msg msg;
};

class peer_sum {
 public:
  // exact: the tree over `micro_batches` leaves; false: the holders' sums in rank order
  // (holders_sum), each holder one part.
  peer_sum(int rank, int holders, std::int64_t micro_batches, bool exact);
  // This holder's partial sums of the layer: the scatter messages to send.
  result<std::vector<chunk_send>> start(const std::vector<grad_part>& mine);
  // A message from another holder (after start): what to send in turn (the gather, once
  // every holder's slices of this one's chunk are in).
  result<std::vector<chunk_send>> take(chunk_msg m);
  bool done() const { return gathered_ == holders_; }
  // Once done: the sum, shaped as this holder's gradients.
  result<std::vector<tensor>> sum() const;

 private:
  result<std::vector<chunk_send>> reduce_own_chunk();
  int rank_, holders_;
  std::int64_t micro_batches_;
  bool exact_;
  bool started_ = false;
  std::vector<tensor> like_;                      // this holder's gradients (shapes)
  std::vector<std::vector<grad_part>> scattered_;  // by sender rank: slices of my chunk
  std::vector<bool> scatter_seen_;
  int scattered_in_ = 0;
  std::vector<tensor> chunks_;                    // by owner rank: summed chunks
  // One holder: the sum itself, shaped as its gradients (a single part is passed on as it is,
  // so a layer held by one device costs no copy of its gradients).
  std::vector<tensor> single_;
  int gathered_ = 0;
};

}  // namespace dynapar::model
