// Argument checks shared by op definitions. Each throws InvalidArgumentError naming the
// op and what it got against what it expected.
#pragma once

#include <initializer_list>
#include <string_view>

#include "cadre/base/errors.h"
#include "cadre/tensor/tensor.h"

namespace cadre::checks {

void defined(const char* op, const Tensor& x, std::string_view what = "input");
void same_dtype(const char* op, const Tensor& a, const Tensor& b);
void same_device(const char* op, const Tensor& a, const Tensor& b);
void same_shape(const char* op, const Tensor& a, const Tensor& b);
void floating(const char* op, const Tensor& x, std::string_view what = "input");
void integer_index(const char* op, const Tensor& x, std::string_view what = "indices");
void rank(const char* op, const Tensor& x, int expected, std::string_view what = "input");
void dtype(const char* op, const Tensor& x, DType expected, std::string_view what = "input");

}  // namespace cadre::checks
