// Shards stay in the node's own directory (training/shard_names.hpp, docs/SECURITY.md "Shards"):
// a controller that names a path outside it, or a name through a link that leads out, is
// refused; a shard's own name resolves inside it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include "training/shard_names.hpp"

namespace fs = std::filesystem;
using dynapar::training::shard_name;
using dynapar::training::shard_path;

TEST_CASE("a shard travels as its step directory and file, and resolves only inside the node's directory", "[shards]") {
  CHECK(shard_name("/run/ck/.step-8.tmp/layer-5.pt") == ".step-8.tmp/layer-5.pt");
  CHECK(shard_name("/run/ck/step-8/staged-layer-2.pt") == "step-8/staged-layer-2.pt");
  const fs::path root = fs::temp_directory_path() / ("dynapar-shards-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "step-8");
  const auto ok = shard_path(root.string(), "step-8/layer-5.pt");
  REQUIRE(ok);
  CHECK(*ok == (fs::canonical(root) / "step-8" / "layer-5.pt").string());
  CHECK(shard_path(root.string(), ".step-9.tmp/layer-0.pt"));  // a directory not made yet
  for (const char* bad : {"/etc/passwd", "../etc/passwd", "step-8/../../x.pt", "layer-5.pt", "a/b/c.pt", "step-8/", "./layer.pt",
                          "step 8/layer.pt", "step-8/..", ""}) {
    INFO(bad);
    const auto r = shard_path(root.string(), bad);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == "bad_shard");
  }
  // A link in the directory that leads out of it is not followed.
  fs::create_directory_symlink("/tmp", root / "out");
  const auto escaped = shard_path(root.string(), "out/layer-0.pt");
  REQUIRE_FALSE(escaped);
  CHECK(escaped.err().message.find("leads out") != std::string::npos);
  // A node given no directory writes and reads no shard.
  const auto none = shard_path("", "step-8/layer-5.pt");
  REQUIRE_FALSE(none);
  CHECK(none.err().message.find("--shard-dir") != std::string::npos);
  fs::remove_all(root);
}
