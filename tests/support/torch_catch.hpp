// Catch for test files that include LibTorch. Debian's LibTorch brings glog, whose CHECK (a
// fatal abort, not a Catch assertion) silently replaced Catch's in every test file that
// included torch after catch.hpp: those checks were neither counted nor reported. Include this
// first, in place of both.
#pragma once

#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>
