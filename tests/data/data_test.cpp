// idx files, Fashion-MNIST, the global sampler and the sample ledger.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/dataset.hpp"
#include "data/text.hpp"
#include "data/idx.hpp"
#include "data/ledger.hpp"
#include "data/sampler.hpp"
#include "data/source.hpp"

using namespace dynapar;
using namespace dynapar::data;

namespace {
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

TEST_CASE("a data source loads what the job names; the fingerprint tells copies apart", "[unit][data]") {
  // Synthetic: the same set as data::synthetic with the job's size and seed, the test split
  // a sixth of it (at least 1000) from the next seed.
  auto train = load(source{"synthetic", 1200, 7}, true);
  auto test = load(source{"synthetic", 1200, 7}, false);
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
  CHECK(load(source{"imagenet", 0, 1}, true).err().message.find("unknown data set 'imagenet'") != std::string::npos);
  CHECK(load(source{"synthetic", 0, 1}, true).err().message.find("synthetic_samples") != std::string::npos);
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
