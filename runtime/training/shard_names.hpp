// Where a node's shards may be (docs/SECURITY.md, "Shards"): a node writes and reads
// checkpoint shards only inside the directory it was given at start (`dynapar node
// --shard-dir`), under names the controller may not turn into paths: a shard is named by its
// checkpoint directory and its file ("step-12/layer-3.pt", ".step-12.tmp/staged-layer-3.pt"),
// never by a path of the controller's choosing.
#pragma once

#include <string>

#include "common/result.hpp"

namespace dynapar::training {

// The name a shard travels under: the last two components of its path as the controller sees
// it (its checkpoint directory's step directory, and the file).
std::string shard_name(const std::string& path);

// The file `name` (shard_name's form) inside `root`: refused (bad_shard, naming why) when the
// node has no root, when the name is not two plain components (no "/" at its start, no "." or
// "..", letters, digits, ".", "-" and "_" only), or when the path leaves `root` through a
// symbolic link.
result<std::string> shard_path(const std::string& root, const std::string& name);

}  // namespace dynapar::training
