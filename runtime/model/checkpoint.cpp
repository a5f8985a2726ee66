// Layers with their optimizer state in one file, in LibTorch's archive format: each layer as
// its wire form (model::to_wire: tensors plus the layout of their optimizer state).
#include <torch/serialize.h>

#include "common/durable_file.hpp"
#include "model/boxes.hpp"

namespace dynapar::model {

namespace {

void write_layer(torch::serialize::OutputArchive& ar, const std::string& key, const layer_copy& l) {
  const auto w = to_wire(l);
  ar.write(key + ".layout", torch::tensor(w.layout, torch::kInt64));
  ar.write(key + ".count", torch::tensor(static_cast<std::int64_t>(w.tensors.size())));
  for (std::size_t i = 0; i < w.tensors.size(); ++i) ar.write(key + ".t" + std::to_string(i), w.tensors[i]->t.to(torch::kCPU));
}

layer_wire read_layer(torch::serialize::InputArchive& ar, const std::string& key) {
  torch::Tensor layout, count;
  ar.read(key + ".layout", layout);
  ar.read(key + ".count", count);
  layer_wire w;
  layout = layout.contiguous();
  w.layout.assign(layout.data_ptr<std::int64_t>(), layout.data_ptr<std::int64_t>() + layout.numel());
  for (std::int64_t i = 0; i < count.item<std::int64_t>(); ++i) {
    torch::Tensor t;
    ar.read(key + ".t" + std::to_string(i), t);
    w.tensors.push_back(box(t));
  }
  return w;
}

// Into memory, then written here: LibTorch's own file writer throws from its destructor when
// the disk is full (an abort), and checks no write of ours.
status write_archive(const std::string& path, torch::serialize::OutputArchive& ar) {
  std::string bytes;
  ar.save_to([&bytes](const void* data, std::size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  return write_durably(path, bytes);
}

}  // namespace

status save_layers(const std::string& path, const std::vector<layer_copy>& layers) {
  try {
    torch::serialize::OutputArchive ar;
    ar.write("layers", torch::tensor(static_cast<std::int64_t>(layers.size())));
    for (std::size_t l = 0; l < layers.size(); ++l) write_layer(ar, "l" + std::to_string(l), layers[l]);
    return write_archive(path, ar);
  } catch (const std::exception& e) {
    return make_error("io", "cannot write '" + path + "': " + e.what());
  }
}

status save_shard(const std::string& path, int layer, const layer_copy& l) {
  try {
    torch::serialize::OutputArchive ar;
    ar.write("layer", torch::tensor(static_cast<std::int64_t>(layer)));
    write_layer(ar, "l", l);
    return write_archive(path, ar);
  } catch (const std::exception& e) {
    return make_error("io", "cannot write '" + path + "': " + e.what());
  }
}

result<layer_wire> read_shard(const std::string& path, int layer) {
  try {
    torch::serialize::InputArchive ar;
    ar.load_from(path);
    torch::Tensor n;
    ar.read("layer", n);
    if (n.item<std::int64_t>() != layer)
      return make_error("bad_checkpoint", "'" + path + "' is layer " + std::to_string(n.item<std::int64_t>()) + "'s shard, not layer " +
                                              std::to_string(layer) + "'s");
    return read_layer(ar, "l");
  } catch (const std::exception& e) {
    return make_error("bad_checkpoint", "cannot read '" + path + "' as a dynapar checkpoint shard: " + e.what());
  }
}

result<std::vector<layer_copy>> load_layers(const std::string& path, const model_chain& m) {
  try {
    torch::serialize::InputArchive ar;
    ar.load_from(path);
    torch::Tensor n;
    ar.read("layers", n);
    if (n.item<std::int64_t>() != static_cast<std::int64_t>(m.layers.size()))
      return make_error("bad_checkpoint", "'" + path + "' holds " + std::to_string(n.item<std::int64_t>()) + " layers; the model has " +
                                              std::to_string(m.layers.size()));
    std::vector<layer_copy> out;
    for (std::size_t l = 0; l < m.layers.size(); ++l) {
      auto layer = from_wire(m, static_cast<int>(l), read_layer(ar, "l" + std::to_string(l)));
      if (!layer) return make_error("bad_checkpoint", "'" + path + "': " + layer.err().message);
      out.push_back(std::move(*layer));
    }
    return out;
  } catch (const std::exception& e) {
    return make_error("bad_checkpoint", "cannot read '" + path + "' as a dynapar checkpoint: " + e.what());
  }
}

}  // namespace dynapar::model
