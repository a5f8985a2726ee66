// The user's images in torchvision's ImageFolder layout (data/source.hpp, kind "images"):
// one folder a class, its name the class (classes in name order), PNG files decoded with
// stb_image (Debian's libstb) and JPEG files with libjpeg-turbo when a batch reads them.
#pragma once

#include <cstdint>
#include <string>

#include "data/source.hpp"

namespace dynapar::data {

// Lists path/train (or path/val; without it, every round(1 / val_share)-th training image
// is held out), keeping names and labels, and makes the fingerprint from each file's digest
// (data/identity.hpp: read once, on up to 8 threads, then indexed). Nothing is decoded
// here: an image that does not decode is named, with its sample, when a batch reads it.
// Errors name the file: one that cannot be read, a val class train lacks, an empty folder.
// Without class folders, path/train may hold WebDataset tar shards instead (data/shards.hpp).
result<dataset> load_images(const source& s, bool train);

// Sample i's values from its image file's bytes, as a batch takes them: decoded, resized to
// the job's rows x cols x channels, augmented for training step `step` (< 0: none), scaled,
// normalised, channel-major. False: `why` they are not an image.
bool image_values(const std::string& bytes, const source& s, int i, std::int64_t step, float* out, std::string& why);

}  // namespace dynapar::data
