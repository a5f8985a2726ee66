// The user's images in torchvision's ImageFolder layout (data/source.hpp, kind "images"):
// one folder a class, its name the class (classes in name order), PNG files decoded with
// stb_image (Debian's libstb) and JPEG files with libjpeg-turbo when a batch reads them.
#pragma once

#include "data/source.hpp"

namespace dynapar::data {

// Lists path/train (or path/val; without it, every round(1 / val_share)-th training image
// is held out), keeping names and labels, and makes the fingerprint from each file's digest
// (data/identity.hpp: read once, on up to 8 threads, then indexed). Nothing is decoded
// here: an image that does not decode is named, with its sample, when a batch reads it.
// Errors name the file: one that cannot be read, a val class train lacks, an empty folder.
result<dataset> load_images(const source& s, bool train);

}  // namespace dynapar::data
