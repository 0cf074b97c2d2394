// Reproducible random streams on Philox4x32-10.
//
// A Generator is a (seed, stream) pair and a counter offset: every draw takes a fresh,
// disjoint range of counter blocks, so results depend only on the seed, the stream and the
// order of draws on this generator, never on threads or devices. Replicas use different
// streams of one seed; initializers derive their stream from the variable's name.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace cadre {

// A range of Philox counter blocks that one draw owns.
struct PhiloxKey {
  uint64_t key = 0;     // from the seed and the stream
  uint64_t offset = 0;  // first counter block
};

class Generator {
 public:
  struct State {
    uint64_t seed = 0;
    uint64_t stream = 0;
    uint64_t offset = 0;
  };

  explicit Generator(uint64_t seed = 0, uint64_t stream = 0);
  Generator(const Generator& other) : Generator(other.state()) {}
  explicit Generator(const State& state);

  // Reserves `blocks` counter blocks; thread-safe.
  PhiloxKey reserve(uint64_t blocks);
  State state() const;  // for checkpoints
  void set_state(const State& state);
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }

 private:
  uint64_t seed_;
  uint64_t stream_;
  uint64_t key_;
  std::atomic<uint64_t> offset_{0};
};

// A stable 64-bit stream id for a name (FNV-1a), e.g. for a variable's initializer.
uint64_t stream_for_name(std::string_view name);

// The calling thread's generator: the innermost GeneratorScope's, else a process-wide
// default seeded with 0.
Generator& current_generator();

class GeneratorScope {
 public:
  explicit GeneratorScope(Generator& generator);
  ~GeneratorScope();
  GeneratorScope(const GeneratorScope&) = delete;
  GeneratorScope& operator=(const GeneratorScope&) = delete;

 private:
  Generator* previous_;
};

}  // namespace cadre
