#include "data/source.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "data/files.hpp"
#include "data/hash.hpp"
#include "data/images.hpp"
#include "data/read_ahead.hpp"
#include "data/text.hpp"

namespace dynapar::data {

status check(const source& s) {
  auto bad = [](const std::string& what) { return make_error("bad_data", "field 'data." + what); };
  const bool files = s.kind == "npy" || s.kind == "tokens" || s.kind == "images" || s.kind == "torch";
  if (files && s.path.empty()) return bad("path' is required for kind " + s.kind);
  if (s.path.find('\n') != std::string::npos) return bad("path' holds a newline");
  if (s.synthetic_samples < 0 || s.synthetic_samples > 1'000'000) return make_error("bad_data", "field 'synthetic_samples' must be in 1..1000000");
  if (!(s.val_share > 0 && s.val_share < 1)) return bad("val_share' must be in (0, 1)");
  if (s.mean.empty() || s.std_dev.empty() || s.mean.size() > 4096 || s.std_dev.size() > 4096)
    return bad("mean' and 'data.std' must each be one number or a list of 1..4096 (one a channel)");
  for (const double m : s.mean)
    if (!std::isfinite(m)) return bad("mean' must be finite");
  for (const double d : s.std_dev)
    if (!(d > 0) || !std::isfinite(d)) return bad("std' must be > 0 and finite");
  if (s.kind == "images")
    if (auto st = check_channels(s, s.image_channels, "the images' channels"); !st) return st;
  if (s.classes < 0 || s.classes > 1'000'000) return bad("classes' must be in 0..1000000");
  if (s.vocab < 0 || s.vocab > (1 << 24)) return bad("vocab' must be in 0..2^24");
  if (s.kind == "tokens" && s.vocab < 2) return bad("vocab' is required for tokens (every id is below it)");
  if (s.window < 1 || s.window > (1 << 16) || s.stride < 0 || s.stride > (1 << 16)) return bad("window' must be in 1..65536 and 'data.stride' in 0..65536");
  if (s.token_type != "uint16" && s.token_type != "uint32") return bad("token_type' must be uint16 or uint32");
  if (s.image_rows < 1 || s.image_cols < 1 || s.image_rows > 4096 || s.image_cols > 4096) return bad("size' must be in 1..4096");
  if (s.image_channels != 1 && s.image_channels != 3) return bad("channels' must be 1 or 3");
  if (s.crop_pad < 0 || s.crop_pad > 1024) return bad("crop_pad' must be in 0..1024");
  if (s.read_ahead < 0 || s.read_ahead > 16) return bad("read_ahead' must be in 0..16 (threads)");
  if (s.next_token && s.kind != "tokens") return make_error("bad_data", "loss next_token predicts the ids of kind tokens; kind " + s.kind + " has no token file");
  if (s.regression && s.kind != "npy" && s.kind != "torch")
    return make_error("bad_data", "loss mse regresses the labels of kind npy or torch; kind " + s.kind + " has class labels");
  return ok_status();
}

status check_channels(const source& s, int channels, const std::string& where) {
  for (const auto* v : {&s.mean, &s.std_dev})
    if (v->size() != 1 && v->size() != static_cast<std::size_t>(channels))
      return make_error("bad_data", std::string("field 'data.") + (v == &s.mean ? "mean" : "std") + "' has " + std::to_string(v->size()) +
                                        " values; " + where + " are " + std::to_string(channels) + ": give one value, or one a channel");
  return ok_status();
}

namespace {

std::string list(const std::vector<double>& v) {
  std::ostringstream o;
  o.precision(17);
  for (std::size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
  return o.str();
}

std::vector<double> parse_list(const std::string& text) {
  std::vector<double> out;
  std::size_t at = 0;
  do {
    const auto comma = text.find(',', at);
    std::size_t used = 0;
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    out.push_back(std::stod(item, &used));
    if (used != item.size()) throw std::invalid_argument(item);
    at = comma == std::string::npos ? text.size() + 1 : comma + 1;
  } while (at <= text.size() && out.size() <= 4096);
  return out;
}

}  // namespace

result<dataset> load(const source& s, bool train) {
  if (auto st = check(s); !st) return st.err();
  if (s.kind == "synthetic") {
    if (s.synthetic_samples < 1) return make_error("bad_data", "synthetic data needs synthetic_samples >= 1");
    return train ? synthetic(s.synthetic_samples, s.seed) : synthetic(std::max(1000, s.synthetic_samples / 6), s.seed + 1);
  }
  if (s.kind == "fortunes") return load_text(fortunes_dir, train ? "train" : "test");
  if (s.kind == "fashion_mnist") return load_fashion_mnist(fashion_mnist_dir, train ? "train" : "t10k");
  if (s.kind == "npy") return load_npy(s, train);
  if (s.kind == "tokens") return load_tokens(s, train);
  if (s.kind == "images") {
    auto d = load_images(s, train);
    // Training reads decode ahead when the run hints at the next step's samples (with 0
    // threads, never: the reads are only timed).
    if (d && train)
      d->store = std::make_shared<read_ahead>(d->store, static_cast<std::size_t>(d->channels) * d->rows * d->cols, s.read_ahead);
    return d;
  }
  return make_error("bad_data", "unknown data set '" + s.kind + "' (fashion_mnist, synthetic, fortunes, npy, tokens or images; torch is read by model::load_data)");
}

// One "key=value" line a field; a path holds no newline (the job file's loader refuses one).
std::string encode(const source& s) {
  std::ostringstream o;
  o.precision(17);
  o << "kind=" << s.kind << "\nsynthetic_samples=" << s.synthetic_samples << "\nseed=" << s.seed << "\npath=" << s.path
    << "\nval_share=" << s.val_share << "\nmean=" << list(s.mean) << "\nstd=" << list(s.std_dev) << "\nclasses=" << s.classes
    << "\ntoken_type=" << s.token_type << "\nwindow=" << s.window << "\nstride=" << s.stride << "\nvocab=" << s.vocab << "\nimage_rows=" << s.image_rows << "\nimage_cols=" << s.image_cols
    << "\nimage_channels=" << s.image_channels << "\ncrop_pad=" << s.crop_pad << "\nflip=" << s.flip << "\nregression=" << s.regression << "\nnext_token=" << s.next_token << "\n";
  return o.str();
}

result<source> decode(const std::string& text) {
  source s;
  if (text.find('=') == std::string::npos) {
    s.kind = text;
    return s;
  }
  std::istringstream in(text);
  std::string line;
  try {
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) return make_error("bad_data", "a data source line without '=': " + line.substr(0, 40));
      const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
      if (k == "kind") s.kind = v;
      else if (k == "synthetic_samples") s.synthetic_samples = std::stoi(v);
      else if (k == "seed") s.seed = std::stoull(v);
      else if (k == "path") s.path = v;
      else if (k == "val_share") s.val_share = std::stod(v);
      else if (k == "mean") s.mean = parse_list(v);
      else if (k == "std") s.std_dev = parse_list(v);
      else if (k == "classes") s.classes = std::stoi(v);
      else if (k == "token_type") s.token_type = v;
      else if (k == "window") s.window = std::stoi(v);
      else if (k == "stride") s.stride = std::stoi(v);
      else if (k == "vocab") s.vocab = std::stoi(v);
      else if (k == "image_rows") s.image_rows = std::stoi(v);
      else if (k == "image_cols") s.image_cols = std::stoi(v);
      else if (k == "image_channels") s.image_channels = std::stoi(v);
      else if (k == "crop_pad") s.crop_pad = std::stoi(v);
      else if (k == "flip") s.flip = std::stoi(v) != 0;
      else if (k == "regression") s.regression = std::stoi(v) != 0;
      else if (k == "next_token") s.next_token = std::stoi(v) != 0;
      else return make_error("bad_data", "a data source field not known: " + k.substr(0, 40));
    }
  } catch (const std::exception&) {
    return make_error("bad_data", "a data source field is not a number: " + line.substr(0, 60));
  }
  if (auto st = check(s); !st) return make_error("bad_data", "a data source with a field out of range: " + st.err().message);
  return s;
}

std::uint64_t fingerprint(const dataset& d) {
  if (d.store) return d.store->fingerprint();
  hasher h;
  for (const std::uint64_t v : {std::uint64_t(d.rows), std::uint64_t(d.cols), std::uint64_t(d.classes), std::uint64_t(d.tokens),
                                std::uint64_t(d.images.size()), std::uint64_t(d.labels.size())})
    h.add(v);
  h.add(d.images.data(), d.images.size());
  h.add(d.labels.data(), d.labels.size());
  return h.value();
}

std::uint64_t fingerprint(const dataset& train, const dataset& val) {
  hasher h;
  h.add(fingerprint(train));
  h.add(fingerprint(val));
  return h.value();
}

}  // namespace dynapar::data
