// The kernel dispatch tables. Backends fill them when they register.
#include "core/kernels/elementwise.h"
#include "core/kernels/indexing.h"
#include "core/kernels/linalg.h"
#include "core/kernels/nn.h"
#include "core/kernels/optimizer.h"
#include "core/kernels/random.h"
#include "core/kernels/reduction.h"

namespace cadre::kernels {

KernelSlot<FillFn> fill{"fill"};
KernelSlot<CopyFn> copy{"copy"};
KernelSlot<CastFn> cast{"cast"};
KernelSlot<UnaryFn> unary{"unary"};
KernelSlot<BinaryFn> binary{"binary"};
KernelSlot<WhereFn> where{"where"};
KernelSlot<ActivationFn> activation{"activation"};
KernelSlot<ActivationGradFn> activation_grad{"activation_grad"};
KernelSlot<ClipFn> clip{"clip"};

KernelSlot<ReduceFn> reduce{"reduce"};
KernelSlot<ArgReduceFn> arg_reduce{"arg_reduce"};

KernelSlot<MatmulFn> matmul{"matmul"};
KernelSlot<BiasActivationGradFn> bias_activation_grad{"bias_activation_grad"};

KernelSlot<SoftmaxFn> softmax{"softmax"};
KernelSlot<SoftmaxGradFn> softmax_grad{"softmax_grad"};
KernelSlot<SparseXentFn> sparse_xent{"sparse_softmax_cross_entropy"};
KernelSlot<SparseXentGradFn> sparse_xent_grad{"sparse_softmax_cross_entropy_grad"};
KernelSlot<Conv2DFn> conv2d{"conv2d"};
KernelSlot<Conv2DGradFn> conv2d_grad{"conv2d_grad"};
KernelSlot<Conv2DGradFromMaxPoolFn> conv2d_grad_from_max_pool{"conv2d_grad_from_max_pool"};
KernelSlot<Pool2DFn> pool2d{"pool2d"};
KernelSlot<Pool2DGradFn> pool2d_grad{"pool2d_grad"};
KernelSlot<Conv2DMaxPoolSuitsFn> conv2d_max_pool_suits{"conv2d_max_pool_suits"};
KernelSlot<Conv2DMaxPoolFn> conv2d_max_pool{"conv2d_max_pool"};
KernelSlot<BatchNormTrainFn> batch_norm_train{"batch_norm_train"};
KernelSlot<BatchNormInferFn> batch_norm_infer{"batch_norm_infer"};
KernelSlot<BatchNormGradFn> batch_norm_grad{"batch_norm_grad"};

KernelSlot<GatherFn> gather{"gather"};
KernelSlot<ScatterAddFn> scatter_add{"scatter_add"};
KernelSlot<OneHotFn> one_hot{"one_hot"};
KernelSlot<FindBadIndexFn> find_bad_index{"find_bad_index"};

KernelSlot<RandomFn> random{"random"};
KernelSlot<DropoutMaskFn> dropout_mask{"dropout_mask"};

KernelSlot<SgdFn> sgd_update{"sgd_update"};
KernelSlot<AdamFn> adam_update{"adam_update"};
KernelSlot<AdagradFn> adagrad_update{"adagrad_update"};
KernelSlot<RmsPropFn> rmsprop_update{"rmsprop_update"};

uint64_t philox_blocks(RandomDistribution dist, int64_t n) {
  int per_block = dist == RandomDistribution::kUniform  ? 4
                  : dist == RandomDistribution::kNormal ? 2
                                                        : 1;  // truncated: one per block
  return static_cast<uint64_t>((n + per_block - 1) / per_block);
}

}  // namespace cadre::kernels
