// Standard normal draws from torch's CPU generator, as torch.randn makes them for a contiguous float32 tensor of at
// least 16 entries, at a fraction of the cost (interp.kernel.randn; the trainer's task draws are ~0.5 M of them a
// step, and torch spends ~5 ns on each, drawing its 32-bit numbers one function call at a time).
//   - The same random numbers: torch's Mersenne Twister (MT19937) from the generator's state, advanced exactly as
//     torch advances it (the same 32-bit outputs, one per entry, and the same state after the call).
//   - The same uniforms u = (r mod 2^24) / 2^24 and the same Box-Muller pairing as torch's normal_fill: in each
//     block of 16 entries, entry j and j + 8 (j < 8) become sqrt(-2 log(1 - u_j)) (cos, sin)(2 pi u_{j+8}); when the
//     size is not a multiple of 16, 16 fresh uniforms overwrite the last 16 entries and are transformed again.
//   - The transform in double precision, rounded once to float: it agrees with torch's float32 transform (whose
//     log and sincos are accurate to about an ulp) to float rounding, not bit for bit.
// The generator's state is torch's CPUGeneratorImplState as Generator.get_state() returns it (interp.kernel checks
// the layout against torch on first use and falls back to torch.randn when it differs).
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

constexpr int MT_N = 624, MT_M = 397;

struct Twister {  // torch's at::mt19937 engine: `left` counts down to the next twist, `next` indexes the state
  uint32_t s[MT_N];
  int32_t left;
  int64_t next;
};

inline uint32_t mix(uint32_t u, uint32_t v) {  // the MT19937 recurrence's twist of (u, v)
  const uint32_t y = (u & 0x80000000u) | (v & 0x7fffffffu);
  return (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
}

// The state's next block of 624 (torch's mt19937::next_state): entry i becomes s[i + M] ^ mix(s[i], s[i + 1]),
// indices mod N, in increasing i (so s[i + M] is already the new value for i >= N - M). Written as plain loops over
// ranges whose reads do not depend on the same range's writes, which the compiler vectorizes.
void twist(uint32_t* s) {
  int i = 0;
  for (; i < MT_N - MT_M; ++i) s[i] = s[i + MT_M] ^ mix(s[i], s[i + 1]);  // reads old s[i + 1 .. i + M]
  // i >= N - M: s[i + M - N] is new and at least N - M = 227 behind i, so blocks of < 227 are independent
  for (; i < MT_N - 1; ++i) s[i] = s[i + MT_M - MT_N] ^ mix(s[i], s[i + 1]);
  s[MT_N - 1] = s[MT_M - 1] ^ mix(s[MT_N - 1], s[0]);
}

inline uint32_t temper(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

// count consecutive uniforms (r mod 2^24) / 2^24 of the engine into u, as count calls of torch's generator.
void uniforms(Twister& t, float* u, int64_t count) {
  while (count > 0) {
    int64_t avail = t.left - 1;  // outputs left before the engine twists again
    if (avail == 0) {
      twist(t.s);
      t.left = MT_N + 1, t.next = 0, avail = MT_N;
    }
    const int64_t k = avail < count ? avail : count;
    const uint32_t* s = t.s + t.next;
    for (int64_t i = 0; i < k; ++i) u[i] = float(temper(s[i]) & 0xffffffu) * 0x1p-24f;
    t.next += k, t.left -= int32_t(k), u += k, count -= k;
  }
}

typedef float F16 __attribute__((vector_size(64)));
typedef int32_t J16 __attribute__((vector_size(64)));

template <typename To, typename From>
inline To bits(From x) {
  To y;
  std::memcpy(&y, &x, sizeof y);
  return y;
}

// log x for x in [2^-24, 1]: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1),
// |s| < 0.172 (series to s^9: relative error < 1e-8); e log 2 in two parts so that e log2_hi is exact.
inline F16 vlog(F16 x) {
  const J16 b = bits<J16>(x);
  J16 e = ((b >> 23) & 0xff) - 127;
  F16 m = bits<F16>((b & 0x007fffff) | 0x3f800000);  // in [1, 2)
  const J16 big = m > 1.41421356f;                   // -1 where m > sqrt 2: halve m, raise e
  m = big ? m * 0.5f : m;
  e = e - big;
  const F16 f = m - 1.0f, s = f / (f + 2.0f), z = s * s;
  const F16 p = ((((2.0f / 9) * z + 2.0f / 7) * z + 2.0f / 5) * z + 2.0f / 3) * z;
  const F16 ef = __builtin_convertvector(e, F16);
  return ef * 0.693145751953125f + (ef * 1.4286068e-06f + (2.0f * s + s * p));
}

// (sin x, cos x) for x in [0, 2 pi]: x = q pi/2 + r with |r| <= pi/4 (pi/2 in three parts, q pi/2_hi exact),
// Taylor polynomials in r (relative error < 2e-9).
inline void vsincos(F16 x, F16& sn, F16& cs) {
  constexpr float round = 0x1.8p23f;  // adding and subtracting it rounds to the nearest integer
  const F16 q = (x * 0.63661977f + round) - round;
  const F16 r = ((x - q * 1.5703125f) - q * 4.8375130e-04f) - q * 7.5497901e-08f, z = r * r;
  const F16 s = r + r * z * ((((1.0f / 362880) * z - 1.0f / 5040) * z + 1.0f / 120) * z - 1.0f / 6);
  const F16 c = 1.0f + z * (((((-1.0f / 3628800) * z + 1.0f / 40320) * z - 1.0f / 720) * z + 1.0f / 24) * z - 0.5f);
  const J16 k = __builtin_convertvector(q, J16) & 3;
  const J16 swap = (k & 1) != 0;  // quadrants 1, 3: sin <-> cos
  const F16 s1 = swap ? c : s, c1 = swap ? s : c;
  sn = (k >= 2) ? -s1 : s1;             // sin negative in quadrants 2, 3
  cs = ((k == 1) | (k == 2)) ? -c1 : c1;  // cos negative in quadrants 1, 2
}

// torch's normal_fill_16 on two blocks of 16 uniforms a and b (a == b allowed), in place: lanes 0-7 of the
// vectors hold block a's pairs, 8-15 block b's.
inline void box_muller(float* a, float* b) {
  F16 x, y;
  std::memcpy(&x, a, sizeof x);
  std::memcpy(&y, b, sizeof y);
  const F16 u1 = 1.0f - __builtin_shufflevector(x, y, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  const F16 u2 = __builtin_shufflevector(x, y, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  F16 sn, cs;
  vsincos(6.2831855f * u2, sn, cs);  // theta = 2 pi u2 in float, as torch computes it
  F16 radius = -2.0f * vlog(u1);
  for (int j = 0; j < 16; ++j) radius[j] = std::sqrt(radius[j]);
  const F16 n1 = radius * cs, n2 = radius * sn;
  const F16 ra = __builtin_shufflevector(n1, n2, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  const F16 rb = __builtin_shufflevector(n1, n2, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  std::memcpy(b, &rb, sizeof rb);
  std::memcpy(a, &ra, sizeof ra);  // a last: when a == b the first block's values stand
}

// Layout of torch's CPUGeneratorImplState (Generator.get_state(): 5056 bytes): the legacy POD's initial seed
// (uint64), left (int32), seeded (int32), next (uint64) and the 624 state words (one per uint64).
constexpr int OFF_LEFT = 8, OFF_NEXT = 16, OFF_STATE = 24;

}  // namespace

extern "C" {

// Fills out[0:n] (n >= 16) as torch.randn(n, generator=g) would for the generator whose get_state() bytes are
// `state`, and advances `state` as torch advances the generator. Returns 0, or 1 for n < 16 (torch's other path).
int interp_randn_f32(float* out, int64_t n, unsigned char* state) {
  if (n < 16) return 1;
  Twister t;
  uint64_t words[MT_N];
  std::memcpy(&t.left, state + OFF_LEFT, sizeof t.left);
  std::memcpy(&t.next, state + OFF_NEXT, sizeof t.next);
  std::memcpy(words, state + OFF_STATE, sizeof words);
  for (int i = 0; i < MT_N; ++i) t.s[i] = uint32_t(words[i]);
  uniforms(t, out, n);
  const int64_t blocks = n / 16;
  for (int64_t i = 0; i + 1 < blocks; i += 2) box_muller(out + 16 * i, out + 16 * (i + 1));
  if (blocks % 2) box_muller(out + 16 * (blocks - 1), out + 16 * (blocks - 1));
  if (n % 16 != 0) {  // torch redraws the last 16 entries
    uniforms(t, out + n - 16, 16);
    box_muller(out + n - 16, out + n - 16);
  }
  for (int i = 0; i < MT_N; ++i) words[i] = t.s[i];
  std::memcpy(state + OFF_LEFT, &t.left, sizeof t.left);
  std::memcpy(state + OFF_NEXT, &t.next, sizeof t.next);
  std::memcpy(state + OFF_STATE, words, sizeof words);
  return 0;
}

}  // extern "C"
