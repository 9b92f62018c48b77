// The MNIST test set for tests that need it: they skip, saying why, where no copy is found
// (scripts/fetch-mnist or TPUSIM_MNIST_DIR provide one).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "host/common/errors.h"
#include "host/data/mnist.h"

// Declares `std::string var` holding the MNIST folder, or skips the test.
#define TPUSIM_MNIST_DIR_OR_SKIP(var)    \
  std::string var;                       \
  try {                                  \
    var = ::tpu::data::FindMnistDir(""); \
  } catch (const ::tpu::UsageError& e) { \
    GTEST_SKIP() << e.what();            \
  }

namespace tpu::test {

// Whether the MNIST test set can be found (tests that need it skip otherwise).
inline bool HaveMnist() {
  try {
    data::FindMnistDir("");
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

}  // namespace tpu::test
