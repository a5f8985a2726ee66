// idx files, Fashion-MNIST, the global sampler and the sample ledger.
#include <catch2/catch.hpp>

#include <zlib.h>
#include <stb_image_write.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <set>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/catalogue.hpp"
#include "data/dataset.hpp"
#include "data/text.hpp"
#include "data/idx.hpp"
#include "data/identity.hpp"
#include "data/ledger.hpp"
#include "data/sampler.hpp"
#include "data/source.hpp"

using namespace dynapar;
using namespace dynapar::data;

namespace {
source src(const std::string& kind, int samples, std::uint64_t seed) {
  source s;
  s.kind = kind, s.synthetic_samples = samples, s.seed = seed;
  return s;
}

std::string write_gz(const std::vector<unsigned char>& bytes, const std::string& name) {
  const std::string path = "/tmp/dynapar_test_" + name + ".gz";
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return path;
}
}  // namespace

TEST_CASE("idx files are read from gzip, and broken ones are named errors", "[unit][data]") {
  // 2 x 3 unsigned bytes.
  auto ok = read_idx_gz(write_gz({0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6}, "ok"));
  REQUIRE(ok);
  CHECK(ok->dims == std::vector<std::uint32_t>{2, 3});
  CHECK(ok->values == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6});
  auto truncated = read_idx_gz(write_gz({0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3}, "short"));
  REQUIRE_FALSE(truncated);
  CHECK(truncated.err().message.find("ends early") != std::string::npos);
  CHECK(read_idx_gz(write_gz({0, 0, 13, 1, 0, 0, 0, 1, 0}, "float")).err().code == "bad_data");
  CHECK(read_idx_gz("/nonexistent.gz").err().code == "io");
}

TEST_CASE("Fashion-MNIST loads from the Debian package", "[unit][data]") {
  auto test = load_fashion_mnist(fashion_mnist_dir, "t10k");
  REQUIRE(test);
  CHECK(test->size() == 10000);
  CHECK(test->images.size() == 10000u * 784);
  // The published test set is balanced: 1000 of each class.
  std::vector<int> count(10, 0);
  for (auto l : test->labels) ++count[l];
  CHECK(std::all_of(count.begin(), count.end(), [](int c) { return c == 1000; }));
  CHECK_FALSE(load_fashion_mnist(fashion_mnist_dir, "validation"));
}

TEST_CASE("a data source loads what the job names, the fingerprint tells copies apart", "[unit][data]") {
  // Synthetic: the same set as data::synthetic with the job's size and seed, the test split
  // a sixth of it (at least 1000) from the next seed.
  auto train = load(src("synthetic", 1200, 7), true);
  auto test = load(src("synthetic", 1200, 7), false);
  REQUIRE(train);
  REQUIRE(test);
  const auto ref = synthetic(1200, 7);
  CHECK((train->images == ref.images && train->labels == ref.labels));
  CHECK((test->size() == 1000 && test->images == synthetic(1000, 8).images));
  CHECK(fingerprint(*train) == fingerprint(ref));
  // One pixel, one label, another shape or another seed: another fingerprint.
  auto pixel = ref;
  pixel.images[777] ^= 1;
  auto label = ref;
  label.labels[5] = static_cast<std::uint8_t>((label.labels[5] + 1) % 10);
  auto shape = ref;
  shape.rows = 49, shape.cols = 16;  // the same bytes, read as another shape
  for (const auto& other : {pixel, label, shape, synthetic(1200, 8)}) CHECK(fingerprint(other) != fingerprint(ref));
  CHECK(fingerprint(dataset{}) != 0);  // 0 means "no data" on the wire
  // Fashion-MNIST: the Debian package's training set.
  auto fm = load(source{}, true);
  REQUIRE(fm);
  CHECK(fm->size() == 60000);
  CHECK(load(src("imagenet", 0, 1), true).err().message.find("unknown data set 'imagenet'") != std::string::npos);
  CHECK(load(src("synthetic", 0, 1), true).err().message.find("synthetic_samples") != std::string::npos);
}

TEST_CASE("text windows: the next character is the label, the splits are disjoint, indexes are skipped", "[unit][data]") {
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / ("dynapar_text_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir / name, std::ios::binary) << text; };
  write("b", "KLMNOPQRST");
  write("a", std::string("abcdefghi") + "\xc3");  // read first (name order); a byte beyond ASCII is 127
  write("a.dat", "an index, not text");
  fs::create_symlink(dir / "a", dir / "a.u8");
  const std::string corpus = std::string("abcdefghi") + char(127) + "KLMNOPQRST";  // 20 characters
  text_options o;
  o.window = 4;
  o.stride = 3;
  o.test_share = 0.25;  // the last 5 characters
  auto train = load_text(dir.string(), "train", o);
  REQUIRE(train);
  CHECK(train->tokens);
  CHECK(train->rows == 1);
  CHECK(train->cols == 4);
  CHECK(train->classes == 128);
  // Starts 0, 3, 6, 9: each window and its label inside the first 15 characters.
  REQUIRE(train->size() == 4);
  for (int i = 0; i < 4; ++i) {
    const int s = 3 * i;
    CHECK(std::string(train->images.begin() + 4 * i, train->images.begin() + 4 * i + 4) == corpus.substr(s, 4));
    CHECK(train->labels[i] == static_cast<std::uint8_t>(corpus[s + 4]));
  }
  auto test = load_text(dir.string(), "test", o);
  REQUIRE(test);
  REQUIRE(test->size() == 1);  // "PQRS" -> 'T': no overlap with training text
  CHECK(std::string(test->images.begin(), test->images.end()) == "PQRS");
  CHECK(test->labels[0] == 'T');
  CHECK(load_text((dir / "none").string(), "train").err().code == "io");
  CHECK(load_text(dir.string(), "validation").err().code == "bad_data");
  o.window = 30;
  CHECK_THAT(load_text(dir.string(), "train", o).err().message, Catch::Contains("too little text"));
  fs::remove_all(dir);
}

TEST_CASE("Debian's fortunes corpus loads as text windows", "[unit][data]") {
  auto train = load_text(fortunes_dir, "train"), test = load_text(fortunes_dir, "test");
  REQUIRE(train);
  REQUIRE(test);
  CHECK(train->size() > 100000);  // about 2.7 MB of text, a window every 8 characters
  CHECK(test->size() > 5000);
  CHECK(std::all_of(train->labels.begin(), train->labels.end(), [](std::uint8_t l) { return l < 128; }));
  // Text, not noise: spaces are the commonest label.
  std::vector<int> count(128, 0);
  for (auto l : train->labels) ++count[l];
  CHECK(std::max_element(count.begin(), count.end()) - count.begin() == ' ');
}

TEST_CASE("the global sampler uses every sample once per epoch, by seed", "[unit][data]") {
  global_sampler s(1000, 64, 7);
  CHECK(s.steps_per_epoch() == 15);
  std::set<int> seen;
  for (int t = 0; t < 15; ++t)
    for (int i : s.step_samples(t)) CHECK(seen.insert(i).second);
  CHECK(seen.size() == 15u * 64);
  global_sampler same(1000, 64, 7), other(1000, 64, 8);
  CHECK(same.step_samples(3) == s.step_samples(3));
  CHECK(other.step_samples(3) != s.step_samples(3));
  CHECK(s.step_samples(15) != s.step_samples(0));  // the next epoch is a new permutation
}

TEST_CASE("the ledger proves exactly-once use and catches loss and duplication", "[unit][data]") {
  global_sampler s(200, 32, 1);
  sample_ledger good(200), lost(200), dup(200);
  for (int t = 0; t < 10; ++t) {
    const auto samples = s.step_samples(t);
    good.applied(t / s.steps_per_epoch(), samples);
    if (t != 4) lost.applied(t / s.steps_per_epoch(), samples);
    dup.applied(t / s.steps_per_epoch(), samples);
    if (t == 4) dup.applied(t / s.steps_per_epoch(), samples);  // a retried step applied twice
  }
  auto g = good.check(s, 10);
  CHECK(g.lost == 0);
  CHECK(g.duplicated == 0);
  CHECK(lost.check(s, 10).lost == 32);
  CHECK(dup.check(s, 10).duplicated == 32);
}

// The user's files. Each .npy is written here byte by byte from NumPy's format description
// (magic, version 1.0, little-endian header length, the dict padded to 64 bytes with '\n'), so
// that the reader is checked against the format, not against itself.
namespace {
std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& fortran, const std::string& body) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + body;
}
template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
std::string fresh_dir(const std::string& name) {
  const std::string dir = "/tmp/dynapar_test_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
source npy_source(const std::string& dir) {
  source s;
  s.kind = "npy", s.path = dir, s.val_share = 0.2;
  return s;
}
}  // namespace

TEST_CASE("npy data: samples read in place, in the file's shape, split and normalised as the job says", "[unit][data]") {
  const auto dir = fresh_dir("npy");
  // 5 samples of [2, 3, 4] float32: sample i, element k = i + k / 100.
  std::vector<float> x;
  for (int i = 0; i < 5; ++i)
    for (int k = 0; k < 24; ++k) x.push_back(static_cast<float>(i + k / 100.0));
  write_file(dir + "/train_inputs.npy", npy_bytes("<f4", "(5, 2, 3, 4)", "False", raw(x)));
  write_file(dir + "/train_labels.npy", npy_bytes("<i8", "(5,)", "False", raw(std::vector<std::int64_t>{3, 0, 6, 1, 2})));
  auto train = load(npy_source(dir), true);
  auto val = load(npy_source(dir), false);
  REQUIRE(train);
  REQUIRE(val);
  // The last fifth (one sample) is held out; the classes are the largest label + 1.
  CHECK((train->size() == 4 && val->size() == 1));
  CHECK((train->channels == 2 && train->rows == 3 && train->cols == 4 && train->classes == 7 && !train->tokens));
  std::vector<float> got(24);
  train->store->values(2, 0, got.data());
  CHECK(got[0] == x[48]);
  CHECK(got[23] == x[71]);
  CHECK(train->store->label(2) == 6);
  val->store->values(0, 0, got.data());
  CHECK((got[5] == x[4 * 24 + 5] && val->store->label(0) == 2));
  CHECK(train->store->samples_read() == 1);  // what a node reads is counted
  // uint8 images [n, rows, cols] with mean and std: (x - mean) / std, one channel.
  std::vector<std::uint8_t> px{0, 10, 20, 30, 40, 50, 60, 70};
  write_file(dir + "/train_inputs.npy", npy_bytes("|u1", "(2, 2, 2)", "False", raw(px)));
  write_file(dir + "/train_labels.npy", npy_bytes("<i4", "(2,)", "False", raw(std::vector<std::int32_t>{1, 0})));
  auto s = npy_source(dir);
  s.mean = {20}, s.std_dev = {4}, s.classes = 10;
  auto u8 = load(s, true);
  REQUIRE(u8);
  CHECK((u8->channels == 1 && u8->rows == 2 && u8->cols == 2 && u8->classes == 10 && u8->size() == 1));
  u8->store->values(0, 0, got.data());
  CHECK((got[0] == -5.0f && got[3] == 2.5f));
  // Validation files of its own, when given, instead of a share of the training files.
  write_file(dir + "/val_inputs.npy", npy_bytes("|u1", "(3, 2, 2)", "False", raw(std::vector<std::uint8_t>(12, 7))));
  write_file(dir + "/val_labels.npy", npy_bytes("|u1", "(3,)", "False", raw(std::vector<std::uint8_t>{0, 1, 2})));
  auto own = load(s, false);
  REQUIRE(own);
  CHECK((own->size() == 3 && own->store->label(2) == 2));
  // Per channel, as torchvision's Normalize: [n, 2 channels, 1, 2], channel c's values fed
  // as (x - mean[c]) / std[c] (by hand: (1 - 10) / 2, (3 - 10) / 2, (104 - 100) / 4, ...).
  std::filesystem::remove(dir + "/val_inputs.npy"), std::filesystem::remove(dir + "/val_labels.npy");
  write_file(dir + "/train_inputs.npy", npy_bytes("|u1", "(2, 2, 1, 2)", "False", raw(std::vector<std::uint8_t>{1, 3, 104, 108, 5, 7, 96, 92})));
  s.mean = {10, 100}, s.std_dev = {2, 4};
  auto per_channel = load(s, true);
  REQUIRE(per_channel);
  per_channel->store->values(0, 0, got.data());
  CHECK((got[0] == -4.5f && got[1] == -3.5f && got[2] == 1.0f && got[3] == 2.0f));
  // The values travel to nodes as text and come back the same (the fingerprint with them).
  auto back = decode(encode(s));
  REQUIRE(back);
  CHECK((back->mean == s.mean && back->std_dev == s.std_dev));
  CHECK(fingerprint(*load(*back, true)) == fingerprint(*per_channel));
  s.std_dev = {2, 8};
  CHECK(fingerprint(*load(s, true)) != fingerprint(*per_channel));
  // A count that is neither one nor the channels' is an error naming the file and the field.
  s.mean = {10, 100, 1000};
  const auto wrong = load(s, true);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.err().message.find("train_inputs.npy") != std::string::npos);
  CHECK(wrong.err().message.find("'data.mean' has 3 values") != std::string::npos);
  CHECK_FALSE(decode("kind=npy\npath=x\nmean=1,,2\n"));
  CHECK_FALSE(decode("kind=npy\npath=x\nstd=1,0\n"));
}

TEST_CASE("npy shards: read in their names' order as one array, split and checked as one file would be", "[unit][data]") {
  // 6 samples of [2, 3, 4] float32 (sample i, element k = i + k / 100; label i % 4), as three
  // shards of 3, 2 and 1 written out of name order, and as one file: the reference.
  const auto dir = fresh_dir("npy_shards"), one = fresh_dir("npy_one");
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (int i = 0; i < 6; ++i) {
    y.push_back(i % 4);
    for (int k = 0; k < 24; ++k) x.push_back(static_cast<float>(i + k / 100.0));
  }
  write_file(one + "/train_inputs.npy", npy_bytes("<f4", "(6, 2, 3, 4)", "False", raw(x)));
  write_file(one + "/train_labels.npy", npy_bytes("<i8", "(6,)", "False", raw(y)));
  std::filesystem::create_directories(dir + "/train");
  auto shard = [&](const std::string& stem, int from, int n) {
    write_file(dir + "/train/" + stem + "_inputs.npy",
               npy_bytes("<f4", "(" + std::to_string(n) + ", 2, 3, 4)", "False", raw(std::vector<float>(x.begin() + from * 24, x.begin() + (from + n) * 24))));
    write_file(dir + "/train/" + stem + "_labels.npy",
               npy_bytes("<i8", "(" + std::to_string(n) + ",)", "False", raw(std::vector<std::int64_t>(y.begin() + from, y.begin() + from + n))));
  };
  shard("part_2", 5, 1), shard("part_0", 0, 3), shard("part_1", 3, 2);
  for (const bool train : {true, false}) {
    auto sharded = load(npy_source(dir), train);
    auto whole = load(npy_source(one), train);
    REQUIRE(sharded);
    REQUIRE(whole);
    REQUIRE(sharded->size() == (train ? 5 : 1));  // the last fifth held out, across the shards
    CHECK((sharded->channels == 2 && sharded->rows == 3 && sharded->cols == 4));
    CHECK(sharded->classes == 4);  // labels 0..3 in the shards, whichever split (one file: its split's)
    std::vector<float> a(24), b(24);
    for (int i = 0; i < sharded->size(); ++i) {
      sharded->store->values(i, 0, a.data());
      whole->store->values(i, 0, b.data());
      CHECK(a == b);
      CHECK(a[7] == x[static_cast<std::size_t>((train ? i : 5) * 24 + 7)]);
      CHECK(sharded->store->label(i) == whole->store->label(i));
    }
    CHECK(sharded->store->samples_read() == sharded->size());
  }
  // The fingerprint: the same loaded twice, another when a shard's label changes.
  const auto before = fingerprint(*load(npy_source(dir), true));
  CHECK(fingerprint(*load(npy_source(dir), true)) == before);
  write_file(dir + "/train/part_1_labels.npy", npy_bytes("<i8", "(2,)", "False", raw(std::vector<std::int64_t>{3, 3})));
  CHECK(fingerprint(*load(npy_source(dir), true)) != before);
  // A validation folder of its own, in the same layout.
  std::filesystem::create_directories(dir + "/val");
  write_file(dir + "/val/v_inputs.npy", npy_bytes("<f4", "(1, 2, 3, 4)", "False", raw(std::vector<float>(24, 0.5f))));
  write_file(dir + "/val/v_labels.npy", npy_bytes("<i8", "(1,)", "False", raw(std::vector<std::int64_t>{2})));
  auto val = load(npy_source(dir), false);
  REQUIRE(val);
  CHECK((val->size() == 1 && val->store->label(0) == 2));
  // What is wrong is named with its shard: a value not finite (and its sample in the shard), a
  // shape unlike the first shard's, labels without inputs, a folder without shards.
  auto fails = [&](const std::string& what) {
    const auto r = load(npy_source(dir), true);
    REQUIRE_FALSE(r);
    INFO(r.err().message);
    CHECK(r.err().message.find(what) != std::string::npos);
  };
  std::filesystem::remove(dir + "/.dynapar-index");  // each rewrite below read again, however soon after the last
  auto bad = std::vector<float>(x.begin() + 3 * 24, x.begin() + 5 * 24);
  bad[24 + 5] = std::nanf("");
  write_file(dir + "/train/part_1_inputs.npy", npy_bytes("<f4", "(2, 2, 3, 4)", "False", raw(bad)));
  fails("part_1_inputs.npy: sample 1 holds a value that is not finite");
  write_file(dir + "/train/part_1_inputs.npy", npy_bytes("<f4", "(2, 4, 3, 2)", "False", raw(std::vector<float>(48, 1.0f))));
  fails("part_1_inputs.npy: a sample is 4 x 3 x 2, but");
  std::filesystem::remove(dir + "/train/part_1_inputs.npy");
  fails("part_1_labels.npy: no part_1_inputs.npy beside it");
  std::filesystem::remove_all(dir + "/train");
  std::filesystem::create_directories(dir + "/train");
  fails("no shards in it");
  std::filesystem::remove_all(dir), std::filesystem::remove_all(one);
}

TEST_CASE("npy regression: labels [n] or [n, k] of any type read as reals, checked finite, and told apart by the fingerprint", "[unit][data]") {
  const auto dir = fresh_dir("npy_reg");
  write_file(dir + "/train_inputs.npy", npy_bytes("<f4", "(5, 3)", "False", raw(std::vector<float>(15, 1.0f))));
  // Sample i's two values, by hand: i / 2 and -i.
  std::vector<double> y;
  for (int i = 0; i < 5; ++i) y.push_back(i / 2.0), y.push_back(-i);
  write_file(dir + "/train_labels.npy", npy_bytes("<f8", "(5, 2)", "False", raw(y)));
  auto s = npy_source(dir);
  CHECK(load(s, true).err().message.find("labels must be integers (class ids), not float64 (real values to regress: loss mse)") != std::string::npos);
  s.regression = true;
  auto train = load(s, true);
  REQUIRE(train);
  CHECK((train->target_values == 2 && train->classes == 2 && train->size() == 4));
  float got[2];
  train->store->target_values(3, got);
  CHECK((got[0] == 1.5f && got[1] == -3.0f));
  auto val = load(s, false);
  REQUIRE(val);
  val->store->target_values(0, got);  // the held-out fifth: sample 4
  CHECK((got[0] == 2.0f && got[1] == -4.0f));
  // Travels to nodes as text; the same files read as classes are another data set.
  auto back = decode(encode(s));
  REQUIRE(back);
  CHECK(back->regression);
  write_file(dir + "/train_labels.npy", npy_bytes("<i8", "(5,)", "False", raw(std::vector<std::int64_t>{3, 0, 6, 1, 2})));
  auto as_values = load(s, true);
  REQUIRE(as_values);
  CHECK(as_values->target_values == 1);
  s.regression = false;
  CHECK(fingerprint(*load(s, true)) != fingerprint(*as_values));
  // A value that is not finite, or labels of three axes, are named.
  s.regression = true;
  y[7] = std::nan("");
  write_file(dir + "/train_labels.npy", npy_bytes("<f8", "(5, 2)", "False", raw(y)));
  CHECK(load(s, true).err().message.find("train_labels.npy: sample 3 has a value to regress that is not finite") != std::string::npos);
  write_file(dir + "/train_labels.npy", npy_bytes("<f8", "(5, 2, 1)", "False", raw(std::vector<double>(10, 0))));
  CHECK(load(s, true).err().message.find("or [n, k] values to regress") != std::string::npos);
  s.kind = "images";
  CHECK(check(s).err().message.find("loss mse regresses the labels of kind npy or torch") != std::string::npos);
}

TEST_CASE("npy data: the fingerprint follows every byte, bad files are errors naming the file and sample", "[unit][data]") {
  const auto dir = fresh_dir("npy_bad");
  std::vector<float> x(40, 0.5f);
  const auto labels = npy_bytes("<i8", "(10,)", "False", raw(std::vector<std::int64_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1}));
  write_file(dir + "/train_labels.npy", labels);
  auto load_with = [&](const std::string& inputs, source s = source{}) {
    write_file(dir + "/train_inputs.npy", inputs);
    if (s.kind != "npy") s = npy_source(dir);
    return load(s, true);
  };
  auto base = load_with(npy_bytes("<f4", "(10, 4)", "False", raw(x)));
  REQUIRE(base);
  const auto fp = fingerprint(*base);
  CHECK(fp == fingerprint(*load_with(npy_bytes("<f4", "(10, 4)", "False", raw(x)))));
  auto y = x;
  y[13] = 0.25f;  // sample 3
  CHECK(fp != fingerprint(*load_with(npy_bytes("<f4", "(10, 4)", "False", raw(y)))));
  CHECK(fp != fingerprint(*load_with(npy_bytes("<f4", "(10, 2, 2)", "False", raw(x)))));  // same bytes, another shape
  auto message = [&](const std::string& inputs, source s = source{}) {
    auto r = load_with(inputs, s);
    return r ? std::string("loaded") : r.err().message;
  };
  const std::string body = raw(x);
  CHECK(message(npy_bytes("<f4", "(10, 4)", "False", body.substr(0, 150))).find("truncated") != std::string::npos);
  CHECK(message(npy_bytes("<f4", "(10, 4)", "False", body + "xx")).find("2 bytes after the array") != std::string::npos);
  CHECK(message(npy_bytes(">f4", "(10, 4)", "False", body)).find("big-endian") != std::string::npos);
  CHECK(message(npy_bytes("<f4", "(10, 4)", "True", body)).find("Fortran") != std::string::npos);
  CHECK(message(npy_bytes("<c8", "(5, 4)", "False", body)).find("<c8 is not read") != std::string::npos);
  CHECK(message("not an array at all").find("not a .npy file") != std::string::npos);
  CHECK(message(npy_bytes("<f4", "(8, 5)", "False", body)).find("labels must be one per input") != std::string::npos);
  y = x;
  y[29] = std::numeric_limits<float>::quiet_NaN();  // sample 7
  const auto nan = message(npy_bytes("<f4", "(10, 4)", "False", raw(y)));
  CHECK(nan.find("train_inputs.npy: sample 7 holds a value that is not finite") != std::string::npos);
  auto three = npy_source(dir);
  three.classes = 3;
  CHECK(message(npy_bytes("<f4", "(10, 4)", "False", body), three).find("train_labels.npy: sample 3 has label 3, outside 0..2") != std::string::npos);
  write_file(dir + "/train_labels.npy", npy_bytes("<f4", "(10,)", "False", raw(std::vector<float>(10, 1.0f))));
  CHECK(message(npy_bytes("<f4", "(10, 4)", "False", body)).find("labels must be integers") != std::string::npos);
  std::filesystem::remove(dir + "/train_labels.npy");
  CHECK(message(npy_bytes("<f4", "(10, 4)", "False", body)).find("train_labels.npy: No such file") != std::string::npos);
}

TEST_CASE("token files: next-token windows over a flat array of ids, checked against the vocabulary", "[unit][data]") {
  const auto dir = fresh_dir("tokens");
  std::vector<std::uint16_t> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(static_cast<std::uint16_t>((i * 7) % 50));
  write_file(dir + "/train.bin", raw(ids));
  source s;
  s.kind = "tokens", s.path = dir, s.vocab = 50, s.window = 8, s.stride = 4, s.val_share = 0.2;
  auto train = load(s, true);
  auto val = load(s, false);
  REQUIRE(train);
  REQUIRE(val);
  // Training: ids 0..79, windows at 0, 4, ... whose label (start + 8) is below 80: 18 of them.
  CHECK((train->size() == 18 && train->tokens && train->rows == 1 && train->cols == 8 && train->classes == 50));
  std::vector<float> w(8);
  train->store->values(5, 0, w.data());
  CHECK((w[0] == ids[20] && w[7] == ids[27] && train->store->label(5) == ids[28]));
  // Validation: ids 80..99, windows at 80, 84, ... with a label: 3.
  CHECK(val->size() == 3);
  val->store->values(2, 0, w.data());
  CHECK((w[0] == ids[88] && val->store->label(2) == ids[96]));
  // Next-token: every position's next id, the window shifted by one (by hand: ids 89..96 for
  // the validation window starting at 88); another data set than the one-label windows.
  auto next = s;
  next.next_token = true;
  auto nval = load(next, false);
  REQUIRE(nval);
  CHECK(nval->target_ids == 8);
  std::vector<std::int64_t> tids(8);
  nval->store->target_ids(2, tids.data());
  for (int k = 0; k < 8; ++k) CHECK(tids[k] == ids[89 + k]);
  CHECK(fingerprint(*nval) != fingerprint(*val));
  CHECK(decode(encode(next))->next_token);
  next.kind = "npy";
  CHECK(check(next).err().message.find("loss next_token predicts the ids of kind tokens") != std::string::npos);
  // uint32 ids read as such; a file of another length, or an id past the vocabulary, is named.
  std::vector<std::uint32_t> wide(ids.begin(), ids.end());
  wide[90] = 70000;
  write_file(dir + "/train.bin", raw(wide));
  s.token_type = "uint32", s.vocab = 80000;
  auto big = load(s, true);
  REQUIRE(big);
  CHECK(load(s, false));
  s.vocab = 50;
  CHECK(load(s, false).err().message.find("train.bin: id 70000 at position 90 is not below vocab 50") != std::string::npos);
  write_file(dir + "/train.bin", raw(wide) + "x");
  CHECK(load(s, true).err().message.find("not a whole number of uint32 ids") != std::string::npos);
  // A source travels as text to node processes and comes back the same.
  auto back = decode(encode(s));
  REQUIRE(back);
  CHECK((back->kind == "tokens" && back->path == dir && back->vocab == 50 && back->window == 8 && back->stride == 4 &&
         back->token_type == "uint32" && back->val_share == 0.2));
  CHECK(decode("synthetic")->kind == "synthetic");
  CHECK_FALSE(decode("kind=npy\nwindow=eight\n"));
  CHECK(decode("kind=images\ncrop_pad=2000000000\n").err().message.find("out of range") != std::string::npos);
  CHECK_FALSE(decode("kind=tokens\nwindow=-3\n"));
}

TEST_CASE("image folders: classes by folder name, pixels as CHW in [0, 1] normalised, seeded augmentation, bad images named", "[unit][data]") {
  const auto dir = fresh_dir("images");
  // 2 x 2 RGB images: pixel (y, x) channel k = 10 * (2 * y + x) + k + 50 * class + image.
  auto png = [&](const std::string& path, int cls, int image) {
    std::vector<unsigned char> px;
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 2; ++x)
        for (int k = 0; k < 3; ++k) px.push_back(static_cast<unsigned char>(10 * (2 * y + x) + k + 50 * cls + image));
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    REQUIRE(stbi_write_png(path.c_str(), 2, 2, 3, px.data(), 6) == 1);
  };
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 5; ++i) png(dir + "/train/" + (c == 0 ? "cat" : "dog") + "/" + std::to_string(i) + ".png", c, i);
  write_file(dir + "/train/dog/notes.txt", "not an image, not listed");
  source s;
  s.kind = "images", s.path = dir, s.image_rows = 2, s.image_cols = 2, s.val_share = 0.2, s.mean = {0.5}, s.std_dev = {0.25};
  auto train = load(s, true);
  auto val = load(s, false);
  REQUIRE(train);
  REQUIRE(val);
  // Every 5th image held out (cat/4, dog/4): 8 train, 2 validation; 2 classes in name order.
  CHECK((train->size() == 8 && val->size() == 2 && train->classes == 2 && train->channels == 3));
  CHECK((train->store->label(0) == 0 && train->store->label(7) == 1 && val->store->label(1) == 1));
  std::vector<float> got(12);
  train->store->values(5, -1, got.data());  // dog/1
  auto want = [](int cls, int image, int y, int x, int k) { return static_cast<float>(((10 * (2 * y + x) + k + 50 * cls + image) / 255.0 - 0.5) / 0.25); };
  CHECK(got[0] == want(1, 1, 0, 0, 0));
  CHECK(got[1] == want(1, 1, 0, 1, 0));   // channel 0, (0, 1)
  CHECK(got[4 + 3] == want(1, 1, 1, 1, 1));  // channel 1, (1, 1)
  // Per channel (torchvision's Normalize(mean, std) after ToTensor): channel k as
  // (v - mean[k]) / std[k]; a count other than 1 or 3 is refused.
  {
    source pc = s;
    pc.mean = {0.4, 0.5, 0.6}, pc.std_dev = {0.2, 0.25, 0.3};
    auto t = load(pc, true);
    REQUIRE(t);
    std::vector<float> v(12);
    t->store->values(5, -1, v.data());
    for (int k = 0; k < 3; ++k)
      for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 2; ++x)
          CHECK(v[(k * 2 + y) * 2 + x] == static_cast<float>(((10 * (2 * y + x) + k + 50 + 1) / 255.0 - pc.mean[k]) / pc.std_dev[k]));
    pc.std_dev = {0.2, 0.25};
    CHECK(load(pc, true).err().message.find("'data.std' has 2 values; the images' channels are 3") != std::string::npos);
  }
  {  // Training images decode ahead when hinted (data/read_ahead.hpp), to the same values; 0: not.
    source ra = s;
    auto t = load(ra, true);
    REQUIRE(t);
    t->store->ahead({5, 6}, 3);
    std::vector<float> ahead(12), direct(12);
    t->store->values(5, 3, ahead.data());
    train->store->values(5, 3, direct.data());
    CHECK(ahead == direct);
    CHECK(t->store->read_ahead_figures().ahead == 1);
    ra.read_ahead = 0;
    auto none = load(ra, true);
    REQUIRE(none);
    none->store->ahead({5}, 3);
    none->store->values(5, 3, direct.data());
    CHECK(none->store->read_ahead_figures().ahead == 0);
    CHECK(none->store->read_ahead_figures().when_read == 1);
    ra.read_ahead = 17;
    CHECK(load(ra, true).err().message.find("'data.read_ahead' must be in 0..16") != std::string::npos);
  }
  // A flip is a mirror image, drawn by the step: the same step draws the same, and over
  // 16 steps both ways occur; evaluation (step -1) never flips.
  s.flip = true;
  auto flips = load(s, true);
  REQUIRE(flips);
  int mirrored = 0;
  for (std::int64_t step = 0; step < 16; ++step) {
    std::vector<float> a(12), b(12);
    flips->store->values(5, step, a.data());
    flips->store->values(5, step, b.data());
    CHECK(a == b);
    if (a[0] == want(1, 1, 0, 1, 0) && a[1] == want(1, 1, 0, 0, 0)) ++mirrored;
    else CHECK(a == got);
  }
  CHECK((mirrored > 0 && mirrored < 16));
  flips->store->values(5, -1, got.data());
  CHECK(got[0] == want(1, 1, 0, 0, 0));
  // A file that does not decode is named, with its sample, when a batch reads it (a start
  // decodes nothing); so is a validation class training lacks, at once.
  write_file(dir + "/train/cat/9.png", "\x89PNG but truncated");
  auto broken = load(s, true);
  REQUIRE(broken);
  REQUIRE(broken->size() == 9);  // cat/0-3, cat/9 (cat/4 held out), dog/0-3
  CHECK_THROWS_WITH(broken->store->values(4, 0, got.data()), Catch::Contains("train/cat/9.png (sample 4): does not decode as PNG or JPEG"));
  std::filesystem::remove(dir + "/train/cat/9.png");
  png(dir + "/val/bird/0.png", 0, 0);
  CHECK(load(s, false).err().message.find("val/bird: a class the training folder does not have") != std::string::npos);
}

namespace {
// A tar written byte by byte from POSIX's ustar description, so that the reader is checked
// against the format: 512-byte headers (name; mode, uid, gid, size and mtime in octal; the
// checksum, the header's bytes summed with its own field as spaces; type; magic "ustar\0" and
// version "00"), each member's data padded to 512 bytes, two zero blocks at the end.
// types: member i's type, '0' (a file) past its end.
std::string tar_bytes(const std::vector<std::pair<std::string, std::string>>& members, const std::string& types = "") {
  std::string out;
  for (std::size_t m = 0; m < members.size(); ++m) {
    const auto& [name, data] = members[m];
    std::string h(512, '\0');
    h.replace(0, name.size(), name);
    auto octal = [&](std::size_t at, std::size_t width, unsigned long long v) {
      char buf[24];
      std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(width - 1), v);
      h.replace(at, width - 1, buf);
    };
    octal(100, 8, 0644), octal(108, 8, 0), octal(116, 8, 0), octal(124, 12, data.size()), octal(136, 12, 0);
    h[156] = m < types.size() ? types[m] : '0';
    h.replace(257, 6, std::string("ustar\0", 6)), h.replace(263, 2, "00");
    h.replace(148, 8, "        ");
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    char buf[8];
    std::snprintf(buf, sizeof buf, "%06o", sum);
    h.replace(148, 6, buf), h[154] = '\0', h[155] = ' ';
    out += h + data + std::string((512 - data.size() % 512) % 512, '\0');
  }
  return out + std::string(1024, '\0');
}
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

TEST_CASE("image tar shards (WebDataset): the same samples as the folder they came from, read by offset, bad shards named", "[unit][data]") {
  // 5 cats and 5 dogs as an image folder (the reference), and as two tar shards holding
  // KEY.png and KEY.cls in the folder's order.
  const auto folder = fresh_dir("tar_ref"), dir = fresh_dir("tar_shards");
  std::vector<std::pair<std::string, std::string>> members;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 5; ++i) {
      const std::string cls = c == 0 ? "cat" : "dog", path = folder + "/train/" + cls + "/" + std::to_string(i) + ".png";
      std::vector<unsigned char> px;
      for (int k = 0; k < 3 * 3 * 3; ++k) px.push_back(static_cast<unsigned char>(7 * k + 40 * c + i));
      std::filesystem::create_directories(folder + "/train/" + cls);
      REQUIRE(stbi_write_png(path.c_str(), 3, 3, 3, px.data(), 9) == 1);
      members.push_back({cls + "_" + std::to_string(i) + ".png", read_file(path)});
      members.push_back({cls + "_" + std::to_string(i) + ".cls", std::to_string(c) + "\n"});
    }
  std::filesystem::create_directories(dir + "/train");
  const std::vector<std::pair<std::string, std::string>> first(members.begin(), members.begin() + 12), rest(members.begin() + 12, members.end());
  write_file(dir + "/train/000000.tar", tar_bytes(first));
  // dog_1's class under a pax header's path (its own length first), its ustar name another.
  auto second = rest;
  second.insert(second.begin() + 1, {"PaxHeader", "18 path=dog_1.cls\n"});
  second[2].first = "not_its_name";
  write_file(dir + "/train/000001.tar", tar_bytes(second, "0x"));
  source s;
  s.kind = "images", s.path = folder, s.image_rows = 3, s.image_cols = 3, s.val_share = 0.2, s.crop_pad = 1, s.flip = true;
  auto t = s;
  t.path = dir;
  for (const bool train : {true, false}) {
    auto want = load(s, train);
    auto got = load(t, train);
    REQUIRE(want);
    REQUIRE(got);
    REQUIRE(got->size() == want->size());
    CHECK(got->classes == 2);
    std::vector<float> a(27), b(27);
    for (int i = 0; i < got->size(); ++i)
      for (std::int64_t step : {-1, 3, 4}) {
        got->store->values(i, step, a.data());
        want->store->values(i, step, b.data());
        CHECK(a == b);
        CHECK(got->store->label(i) == want->store->label(i));
      }
  }
  CHECK(load(t, true)->store->samples_read() == 0);  // nothing decoded at start
  const auto fp = fingerprint(*load(t, true));
  CHECK(fingerprint(*load(t, true)) == fp);
  {  // A warm start maps the split's listing and reads no header: one damaged behind its back
    // (the shard's time put back) is not seen, as the listing says; a class bound set since is.
    const auto tar = dir + "/train/000000.tar";
    const auto when = std::filesystem::last_write_time(tar);
    auto bytes = tar_bytes(first);
    bytes[3] ^= 1;
    write_file(tar, bytes);
    std::filesystem::last_write_time(tar, when);
    CHECK(fingerprint(*load(t, true)) == fp);
    auto bounded = t;
    bounded.classes = 1;
    const auto r = load(bounded, true);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains("000000.tar: member dog_0.png is class 1, outside 0..0"));
    write_file(tar, tar_bytes(first));
    std::filesystem::last_write_time(tar, when);
  }
  // What is wrong is named with its tar, member and sample.
  auto fails = [&](const std::string& what) {
    const auto r = load(t, true);
    REQUIRE_FALSE(r);
    INFO(r.err().message);
    CHECK(r.err().message.find(what) != std::string::npos);
  };
  auto edited = first;
  edited[3].second = "1\n";  // cat_1 now a dog
  write_file(dir + "/train/000000.tar", tar_bytes(edited));
  CHECK(fingerprint(*load(t, true)) != fp);
  edited[3].second = "one";
  write_file(dir + "/train/000000.tar", tar_bytes(edited));
  fails("000000.tar: member cat_1.cls is not a class id");
  edited = first;
  edited.erase(edited.begin() + 5);  // cat_2's class
  write_file(dir + "/train/000000.tar", tar_bytes(edited));
  fails("000000.tar: sample cat_2 has no class (KEY.cls)");
  auto damaged = tar_bytes(first);
  damaged[520] ^= 1;  // in the first member's data: not noticed at start, named when decoded
  damaged[600] = 'x';
  write_file(dir + "/train/000000.tar", damaged);
  auto late = load(t, true);
  REQUIRE(late);
  std::vector<float> px(27);
  CHECK_THROWS_WITH(late->store->values(0, 0, px.data()), Catch::Contains("000000.tar: member cat_0.png (sample 0): does not decode as PNG or JPEG"));
  damaged[3] ^= 1;  // in the first header: its checksum no longer matches
  write_file(dir + "/train/000000.tar", damaged);
  fails("000000.tar: at byte 0: the header's checksum does not match it");
  write_file(dir + "/train/000000.tar", tar_bytes(first).substr(0, 530));
  fails("000000.tar: at byte 0: a member of");
  std::filesystem::remove_all(dir), std::filesystem::remove_all(folder);
}

TEST_CASE("an image folder's start reads each file once: its digests are indexed beside it, reused while size and time match", "[unit][data]") {
  const auto dir = fresh_dir("many_images");
  auto png = [&](const std::string& path, int value) {
    std::vector<unsigned char> px(12, static_cast<unsigned char>(value));
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    REQUIRE(stbi_write_png(path.c_str(), 2, 2, 3, px.data(), 6) == 1);
  };
  auto name = [&](const char* cls, int i) { return dir + "/train/" + cls + "/" + (i < 10 ? "0" : "") + std::to_string(i) + ".png"; };
  for (int i = 0; i < 60; ++i) {  // 120 files: several threads read them
    png(name("cat", i), i);
    png(name("dog", i), 100 + i);
  }
  source s;
  s.kind = "images", s.path = dir, s.image_rows = 2, s.image_cols = 2, s.val_share = 0.5;
  auto a = load(s, true);
  REQUIRE(a);
  CHECK(a->size() == 60);
  // The index beside the data holds every file's digest, for both splits' loads.
  REQUIRE(std::filesystem::exists(dir + "/.dynapar-index"));
  auto v = load(s, false);
  REQUIRE(v);
  auto index = identity_index::open(dir);
  for (int i = 0; i < 60; ++i) CHECK((index.find(name("cat", i), "bytes") && index.find(name("dog", i), "bytes")));
  CHECK(index.reused() == 120);
  // Without the index, the files read again give the same fingerprint.
  std::filesystem::remove(dir + "/.dynapar-index");
  auto b = load(s, true);
  REQUIRE(b);
  CHECK(fingerprint(*a) == fingerprint(*b));
  // A warm start reads no file: bytes changed behind the index's back (same size, the old
  // modification time put back) leave the fingerprint as it was, as the index says.
  const auto when = std::filesystem::last_write_time(name("dog", 58));
  {  // one byte of a training image (every 2nd is held out), in place
    std::fstream f(name("dog", 58), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  std::filesystem::last_write_time(name("dog", 58), when);
  auto stale = load(s, true);
  REQUIRE(stale);
  CHECK(fingerprint(*stale) == fingerprint(*a));
  // Touched (a new modification time), it is still listed from the index (its folder is
  // unchanged, so no file of it is looked at), and refused when a batch reads it, named with
  // its sample (the 30 training cats, then dog/58 the 30th dog): its bytes are not the index's.
  std::filesystem::last_write_time(name("dog", 58), when + std::chrono::seconds(1));
  auto c = load(s, true);
  REQUIRE(c);
  CHECK(fingerprint(*c) == fingerprint(*a));
  std::vector<float> px(12);
  CHECK_THROWS_WITH(c->store->values(59, 0, px.data()), Catch::Contains("dog/58.png (sample 59): changed after the data's index"));
  c->store->values(58, 0, px.data());  // dog/56, as it was
  // Without the index every file is read again: another fingerprint.
  std::filesystem::remove(dir + "/.dynapar-index");
  c = load(s, true);
  REQUIRE(c);
  CHECK(fingerprint(*c) != fingerprint(*a));
  // A touch alone (the same bytes, a new time) reads as before.
  std::filesystem::last_write_time(name("dog", 56), when + std::chrono::seconds(3));
  c->store->values(58, 0, px.data());
  // A class folder as it was is listed from the index; one with a file added is listed again.
  png(name("cat", 60), 60);
  auto e = load(s, true);
  REQUIRE(e);
  CHECK(e->size() == 61);
  // A warm start maps the split's listing and reads neither the files nor the index: an index
  // emptied (but there) is not filled again, as it would be by files read for their digests.
  write_file(dir + "/.dynapar-index", "dynapar data index 3\n");
  auto w = load(s, true);
  REQUIRE(w);
  CHECK(fingerprint(*w) == fingerprint(*e));
  CHECK(std::filesystem::file_size(dir + "/.dynapar-index") == 21);
  // A new class folder is a new listing: the split's folder changed.
  png(dir + "/train/eel/00.png", 200);
  auto g = load(s, false);
  REQUIRE(g);
  CHECK(g->classes == 3);
  CHECK(g->size() == 61);  // 122 files: 61 cats, 60 dogs, the eel held out as the last of every 2nd
  CHECK(g->store->label(60) == 2);
  std::filesystem::remove_all(dir + "/train/eel");
  // A torn listing (the split's catalogue beside the index) is read as none, and written whole again.
  const auto listing = dir + "/.dynapar-index.train";
  REQUIRE(std::filesystem::exists(listing));
  std::filesystem::resize_file(listing, std::filesystem::file_size(listing) - 7);
  auto t = load(s, true);
  REQUIRE(t);
  CHECK(fingerprint(*t) == fingerprint(*e));
  REQUIRE(catalogue::load(dir, "train", "images"));
  CHECK(catalogue::load(dir, "train", "images")->size() == 121);
  // A torn index, without a listing to start from, is read as none (every file read again),
  // and written whole again.
  std::filesystem::remove(listing);
  write_file(dir + "/.dynapar-index", "dynapar data index 3\nbytes\t/train/cat/00.png\t12 3");
  auto d = load(s, true);
  REQUIRE(d);
  CHECK(fingerprint(*d) == fingerprint(*e));
  CHECK(identity_index::open(dir).find(name("cat", 2), "bytes"));  // a training image (the odd ones are held out)
}

TEST_CASE("JPEG images decode with libjpeg-turbo at a reduced scale: the colour kept, a broken one named when read", "[unit][data]") {
  const auto dir = fresh_dir("jpegs");
  // 256 x 256 of one colour per class (JPEG keeps a flat colour within a step or two of its value).
  auto jpg = [&](const std::string& path, unsigned char r, unsigned char g, unsigned char b) {
    std::vector<unsigned char> px;
    for (int i = 0; i < 256 * 256; ++i) px.insert(px.end(), {r, g, b});
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    REQUIRE(stbi_write_jpg(path.c_str(), 256, 256, 3, px.data(), 95) == 1);
  };
  for (int i = 0; i < 3; ++i) {
    jpg(dir + "/train/a/" + std::to_string(i) + ".jpg", 200, 40, 90);
    jpg(dir + "/train/b/" + std::to_string(i) + ".jpg", 10, 250, 128);
  }
  source s;
  s.kind = "images", s.path = dir, s.image_rows = 32, s.image_cols = 32, s.val_share = 0.2;
  auto d = load(s, true);
  REQUIRE(d);
  REQUIRE(d->size() == 5);  // a/0, a/1, a/2, b/0, b/2 (every 5th held out: b/1)
  std::vector<float> v(3 * 32 * 32);
  d->store->values(0, -1, v.data());  // a/0: channel k's plane is the colour's channel k
  for (int k = 0; k < 3; ++k)
    for (int p = 0; p < 32 * 32; ++p) CHECK(std::abs(v[static_cast<std::size_t>(k * 1024 + p)] * 255.0 - std::array<int, 3>{200, 40, 90}[k]) <= 3);
  s.image_channels = 1;  // grey: the colour's luma (0.299 R + 0.587 G + 0.114 B)
  auto grey = load(s, true);
  REQUIRE(grey);
  std::vector<float> g(32 * 32);
  grey->store->values(3, -1, g.data());  // b/0
  for (float x : g) CHECK(std::abs(x * 255.0 - (0.299 * 10 + 0.587 * 250 + 0.114 * 128)) <= 3);
  // A JPEG cut short: named, with libjpeg's reason, when read.
  write_file(dir + "/train/a/9.jpg", std::string("\xFF\xD8\xFF\xE0", 4) + "not the rest of a JPEG");
  auto broken = load(s, true);
  REQUIRE(broken);  // a/0, a/1, a/2, a/9, then b/1 and b/2 (b/0 held out)
  CHECK_THROWS_WITH(broken->store->values(3, -1, g.data()), Catch::Contains("train/a/9.jpg (sample 3): does not decode as PNG or JPEG ("));
}
