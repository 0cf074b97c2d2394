#include "cadre/random/generator.h"

namespace cadre {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t derive_key(uint64_t seed, uint64_t stream) {
  return splitmix64(splitmix64(seed) ^ splitmix64(stream + 0x632BE59BD9B4E019ull));
}

thread_local Generator* current = nullptr;

}  // namespace

Generator::Generator(uint64_t seed, uint64_t stream)
    : seed_(seed), stream_(stream), key_(derive_key(seed, stream)) {}

Generator::Generator(const State& state) : Generator(state.seed, state.stream) {
  offset_.store(state.offset);
}

PhiloxKey Generator::reserve(uint64_t blocks) {
  return {key_, offset_.fetch_add(blocks, std::memory_order_relaxed)};
}

Generator::State Generator::state() const {
  return {seed_, stream_, offset_.load(std::memory_order_relaxed)};
}

void Generator::set_state(const State& state) {
  seed_ = state.seed;
  stream_ = state.stream;
  key_ = derive_key(seed_, stream_);
  offset_.store(state.offset, std::memory_order_relaxed);
}

uint64_t stream_for_name(std::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

Generator& current_generator() {
  if (current != nullptr) return *current;
  static Generator default_generator(0, 0);
  return default_generator;
}

GeneratorScope::GeneratorScope(Generator& generator) : previous_(current) { current = &generator; }
GeneratorScope::~GeneratorScope() { current = previous_; }

}  // namespace cadre
