#pragma once
// Runs a test body once per SIMD target that this binary was compiled for and this CPU supports
// (the float kernels dispatch to each in turn), then restores the default choice. Failures name
// the target through SCOPED_TRACE.
#include <gtest/gtest.h>

#include <string>

#include "kernels/kernels.hpp"

namespace marin::testing {

template <class F>
void for_each_isa(F&& body) {
  for (const std::string& isa : kernels::isa_targets()) {
    kernels::force_isa(isa);
    ASSERT_EQ(kernels::isa_name(), isa);
    SCOPED_TRACE("isa " + isa);
    body();
  }
  kernels::force_isa("");
}

}  // namespace marin::testing
