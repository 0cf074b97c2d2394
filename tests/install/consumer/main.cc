// Fits y = 2x + 1 with one dense unit through the installed headers and libraries.
#include <cadre/cadre.h>

#include <cmath>
#include <cstdio>

int main() {
  using namespace cadre;
  nn::VariableStore store(/*seed=*/1);
  nn::VariableStoreScope scope(store);
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3}, Shape{4, 1});
  Tensor y = x * 2.0 + 1.0;
  auto optimizer = nn::optimizers::sgd(0.1);
  float loss_value = 0;
  for (int step = 0; step < 300; ++step) {
    GradientTape tape;
    Tensor loss = nn::mean_squared_error(y, nn::dense("line", x, 1));
    optimizer->minimize(tape, loss);
    loss_value = loss.item<float>();
  }
  std::printf("cadre %s: final loss %g\n", CADRE_VERSION, loss_value);
  return loss_value < 1e-4 ? 0 : 1;
}
