// The MNIST family (MNIST, Fashion-MNIST) as Datasets, read from IDX files.
#pragma once

#include <memory>
#include <string>

#include "cadre/io/dataset.h"
#include "cadre/io/idx.h"

namespace cadre::io {

// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr char kFashionMnistDirectory[] = "/usr/share/datasets/fashion-mnist";

enum class ImageFormat {
  kScaledFloat,  // float32 [784], pixel / 255 in [0, 1]: what the example models take
  kRawBytes,     // uint8 [784] as stored; scale_pixels() converts (best after batch)
};

// Elements {"image": image} with labels int64 scalars (the class, 0-9), in file order.
// `directory` holds {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz. The files are read,
// decompressed and (for kScaledFloat) converted when the dataset is made: NotFoundError
// names a missing file, DataLossError a damaged one and the byte offset. Elements are views
// of the decoded array (float32: 188 MB for the training set; uint8: 47 MB), which the
// dataset's iterators share. The files are read through `env` (the real file system when
// null).
Dataset fashion_mnist(const std::string& directory = kFashionMnistDirectory,
                      Split split = Split::kTrain, ImageFormat format = ImageFormat::kScaledFloat,
                      const std::shared_ptr<Env>& env = nullptr);
// The same for the original MNIST digits (same file names and layout).
Dataset mnist(const std::string& directory, Split split = Split::kTrain,
              ImageFormat format = ImageFormat::kScaledFloat,
              const std::shared_ptr<Env>& env = nullptr);

// uint8 pixels (any shape) as float32 of the same shape, pixel / 255: bit for bit what
// float division gives, computed faster.
Tensor scale_pixels(const Tensor& pixels);

// A map function applying scale_pixels to the feature `name`. It serves single elements
// and whole batches alike; mapping after batch makes one vectorised call per batch, and
// since scaling commutes with shuffle and batch, the batches are the same as with
// kScaledFloat:
//   fashion_mnist(dir, Split::kTrain, ImageFormat::kRawBytes)
//       .shuffle(10'000, seed).repeat().batch(256).map(scale_pixels_fn()).prefetch()
Dataset::MapFn scale_pixels_fn(std::string name = "image");

}  // namespace cadre::io
