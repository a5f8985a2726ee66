#include "training/shard_names.hpp"

#include <filesystem>

namespace dynapar::training {
namespace fs = std::filesystem;

std::string shard_name(const std::string& path) {
  const fs::path p(path);
  return (p.parent_path().filename() / p.filename()).string();
}

namespace {
bool plain(const std::string& part) {
  if (part.empty() || part == "." || part == ".." || part.size() > 128) return false;
  for (char c : part)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) return false;
  return true;
}
}  // namespace

result<std::string> shard_path(const std::string& root, const std::string& name) {
  auto refuse = [&](const std::string& why) { return make_error("bad_shard", "shard '" + name + "': " + why); };
  if (root.empty()) return refuse("this node was given no --shard-dir, so it writes and reads no shard");
  const auto slash = name.find('/');
  if (slash == std::string::npos || name.find('/', slash + 1) != std::string::npos || !plain(name.substr(0, slash)) ||
      !plain(name.substr(slash + 1)))
    return refuse("not a shard's name (a step directory and a file, e.g. step-12/layer-3.pt)");
  std::error_code ec;
  const auto base = fs::weakly_canonical(fs::absolute(root), ec);
  if (ec) return refuse("cannot resolve '" + root + "': " + ec.message());
  const auto full = fs::weakly_canonical(base / name, ec);
  if (ec) return refuse("cannot resolve it in '" + root + "': " + ec.message());
  // A link inside the directory that leads out of it is not followed.
  const auto rel = full.lexically_relative(base);
  if (rel.empty() || *rel.begin() == "..") return refuse("it leads out of '" + root + "'");
  return full.string();
}

}  // namespace dynapar::training
