#include "model/peer_sum.hpp"

#include "model/boxes.hpp"

namespace dynapar::model {
namespace {

// A part's gradients as one flat vector (a copy only where there are several parameters).
torch::Tensor flat(const grad_part& p) {
  std::vector<torch::Tensor> views;
  for (const auto& g : p.grads) views.push_back(g->t.reshape({-1}));
  return views.size() == 1 ? views[0] : torch::cat(views);
}

std::int64_t bound(std::int64_t numel, int k, int n) { return numel * k / n; }

}  // namespace

peer_sum::peer_sum(int rank, int holders, std::int64_t micro_batches, bool exact)
    : rank_(rank), holders_(holders), micro_batches_(micro_batches), exact_(exact),
      scattered_(static_cast<std::size_t>(std::max(holders, 0))), scatter_seen_(scattered_.size(), false),
      chunks_(scattered_.size()) {}

result<std::vector<chunk_send>> peer_sum::start(const std::vector<grad_part>& mine) {
  if (holders_ < 1 || rank_ < 0 || rank_ >= holders_) return make_error("bad_sum", "rank " + std::to_string(rank_) + " of " + std::to_string(holders_) + " holders");
  if (started_) return make_error("bad_sum", "the sum started twice");
  if (mine.empty()) return make_error("bad_sum", "this holder has no partial sums of the layer");
  for (const auto& p : mine) {
    if (p.grads.size() != mine.front().grads.size()) return make_error("bad_sum", "partial sums of different lengths");
    for (const auto& g : p.grads)
      if (!g) return make_error("bad_sum", "a partial sum without its tensor");
  }
  started_ = true;
  like_ = mine.front().grads;
  // Layers without parameters or running statistics (Flatten, ReLU): every holder's sum is
  // empty, known without a message (each holder runs the same layers of the same plan).
  if (like_.empty()) {
    gathered_ = holders_;
    return std::vector<chunk_send>{};
  }
  if (holders_ == 1) {  // nothing to send: the tree over this holder's parts as they are, no flat copy
    auto s = exact_ ? tree_sum(mine, micro_batches_) : holders_sum(mine);
    if (!s) return s.err();
    single_ = std::move(*s);
    gathered_ = 1;
    return std::vector<chunk_send>{};
  }
  std::vector<torch::Tensor> flats;
  for (const auto& p : mine) flats.push_back(flat(p));
  const auto numel = flats.front().numel();
  std::vector<chunk_send> out;
  for (int k = 0; k < holders_; ++k) {
    chunk_msg m{false, rank_, {}};
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (flats[i].numel() != numel) return make_error("bad_sum", "partial sums of different sizes");
      m.parts.push_back({mine[i].level, mine[i].index, {box(flats[i].slice(0, bound(numel, k, holders_), bound(numel, k + 1, holders_)))}});
    }
    if (k != rank_) {
      out.push_back({k, std::move(m)});
      continue;
    }
    scattered_[static_cast<std::size_t>(k)] = std::move(m.parts);
    scatter_seen_[static_cast<std::size_t>(k)] = true;
    ++scattered_in_;
  }
  if (scattered_in_ == holders_) {
    auto more = reduce_own_chunk();
    if (!more) return more.err();
    for (auto& s : *more) out.push_back(std::move(s));
  }
  return out;
}

result<std::vector<chunk_send>> peer_sum::take(chunk_msg m) {
  if (!started_) return make_error("bad_sum", "a message before the sum started");
  if (like_.empty()) return make_error("bad_sum", "rank " + std::to_string(m.from) + " sent parts of a layer without gradients");
  if (m.from < 0 || m.from >= holders_ || m.from == rank_)
    return make_error("bad_sum", "a message from rank " + std::to_string(m.from) + " of " + std::to_string(holders_));
  const auto from = static_cast<std::size_t>(m.from);
  for (const auto& p : m.parts)
    if (p.grads.size() != 1 || !p.grads[0]) return make_error("bad_sum", "rank " + std::to_string(m.from) + " sent a part without one tensor");
  if (m.gather) {
    if (chunks_[from]) return make_error("bad_sum", "rank " + std::to_string(m.from) + " sent its summed chunk twice");
    if (m.parts.size() != 1) return make_error("bad_sum", "rank " + std::to_string(m.from) + " sent a summed chunk of " + std::to_string(m.parts.size()) + " parts");
    chunks_[from] = m.parts[0].grads[0];
    ++gathered_;
    return std::vector<chunk_send>{};
  }
  if (scatter_seen_[from]) return make_error("bad_sum", "rank " + std::to_string(m.from) + " sent its slices twice");
  if (!exact_ && m.parts.size() != 1) return make_error("bad_sum", "exact: false takes one sum per holder, rank " + std::to_string(m.from) + " sent " + std::to_string(m.parts.size()));
  scattered_[from] = std::move(m.parts);
  scatter_seen_[from] = true;
  if (++scattered_in_ < holders_) return std::vector<chunk_send>{};
  return reduce_own_chunk();
}

result<std::vector<chunk_send>> peer_sum::reduce_own_chunk() {
  std::vector<grad_part> all;  // in rank order: exact: false adds the holders in that order
  for (auto& parts : scattered_)
    for (auto& p : parts) all.push_back(std::move(p));
  scattered_.clear();
  auto s = exact_ ? tree_sum(std::move(all), micro_batches_) : holders_sum(std::move(all));
  if (!s) return s.err();
  const auto mine = s->front();
  chunks_[static_cast<std::size_t>(rank_)] = mine;
  ++gathered_;
  std::vector<chunk_send> out;
  for (int k = 0; k < holders_; ++k)
    if (k != rank_) out.push_back({k, chunk_msg{true, rank_, {grad_part{0, 0, {mine}}}}});
  return out;
}

result<std::vector<tensor>> peer_sum::sum() const {
  if (!done()) return make_error("bad_sum", "the sum is not complete");
  if (holders_ == 1 || like_.empty()) return single_;
  std::vector<torch::Tensor> parts;
  const auto dev = like_.front()->t.device();
  for (const auto& c : chunks_) parts.push_back(c->t.reshape({-1}).to(dev));
  auto whole = torch::cat(parts);
  std::int64_t at = 0;
  std::vector<tensor> out;
  for (const auto& l : like_) {
    const auto n = l->t.numel();
    if (at + n > whole.numel()) return make_error("bad_sum", "the summed chunks are smaller than the layer");
    out.push_back(box(whole.slice(0, at, at + n).view(l->t.sizes())));
    at += n;
  }
  if (at != whole.numel()) return make_error("bad_sum", "the summed chunks are larger than the layer");
  return out;
}

}  // namespace dynapar::model
