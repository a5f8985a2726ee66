// Files that are on the disk when the call returns: every write checked (a full disk fails
// here, not later as a torn file) and the file or directory synced (fsync), so that a rename
// publishing it cannot outlive a power cut its bytes did not (checkpoints, docs/RELIABILITY.md).
#pragma once

#include <string>

#include "common/result.hpp"

namespace dynapar {

// Creates or truncates `path` and writes `bytes`, synced. Errors name the path and errno's text.
status write_durably(const std::string& path, const std::string& bytes);
// fsync of an existing file or directory (a directory: its entries, after a rename in it).
status sync_path(const std::string& path, bool directory);

}  // namespace dynapar
