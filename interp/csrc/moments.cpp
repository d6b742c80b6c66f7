// Fused CPU kernel of interp.moments.MomentRecursion: the whole layer recursion of one sequence at a time, its
// matrices kept in L1 cache, forward and hand-written backward (Vladymyrov et al. 2024, Theorem 4.1):
//     S^{l+1} = N^T S^l N  with  N = I + A^T,  A = sum_k P_k S Q_k  (FULL)  or  A = S (.) Omega  (DIAG / GD++).
// The carried matrix is S-hat = [[S, e_q], [e_q^T, 0]] of width W = D + 1 <= LD, each row stored in LD lanes
// (columns W..LD-1 are zero, so every row is one or a few SIMD vectors of compile-time length).
// Nothing per sequence is kept between the forward and the backward call: the backward recomputes each
// sequence's forward in L1 before differentiating it. Keeping the layers instead cost more (2048 sequences of
// a 7-layer model are 11-33 MB, far beyond L2; measured 1.3-2.5x slower per sequence than in cache).
// The training mode (fused) needs no recomputation: it reads each sequence's draw (x_i, w, sigma, xi_i, the
// query), forms its tokens and S, runs its forward, its half squared error and that loss's derivative, and its
// backward while the layers are still in L1.
// Plain C ABI, called through ctypes with the data pointers of contiguous torch tensors; a call handles the
// sequences [b0, b1), so Python threads can split a batch (ctypes releases the GIL during the call).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// The build's widest vector in bytes, and its name (setup.py sets both per build): 64 for AVX-512, 32 for AVX2, 16 for
// SSE2 and NEON. A vector wider than the ISA's registers would be split by the compiler into many instructions
// (measured: 10x the build time and slower code on an AVX2 CPU).
#ifndef INTERP_VECTOR_BYTES
#define INTERP_VECTOR_BYTES 16
#endif
#ifndef INTERP_ISA
#define INTERP_ISA "portable"
#endif
#ifndef INTERP_VECTOR_REGS  // the build's vector registers: 32 with AVX-512 and NEON, 16 with AVX2 and SSE2
#define INTERP_VECTOR_REGS 16
#endif

// A row of LD lanes as NV vectors of NL lanes (GCC/Clang vector extensions; each one register of the build's ISA).
template <typename T, int LD>
struct Simd {
  static constexpr int VMAX = INTERP_VECTOR_BYTES;
  static constexpr int VB = LD * int(sizeof(T)) < VMAX ? LD * int(sizeof(T)) : VMAX;
  static constexpr int NL = VB / int(sizeof(T));
  static constexpr int NV = LD / NL;
  typedef T V __attribute__((vector_size(VB)));
};

// Elementwise over rows < W, all LD lanes, in explicit vectors (the operands may not alias).
template <typename T, int LD, typename F>
inline void rowwise(int W, F f) {
  using S = Simd<T, LD>;
  for (int i = 0; i < W; ++i)
    for (int v = 0; v < S::NV; ++v) f(i * LD + v * S::NL);
}
template <typename T, int LD>
inline typename Simd<T, LD>::V vload(const T* p) {
  typename Simd<T, LD>::V x;
  std::memcpy(&x, p, sizeof x);
  return x;
}
template <typename T, int LD>
inline void vstore(T* p, typename Simd<T, LD>::V x) {
  std::memcpy(p, &x, sizeof x);
}

// Rows i..i+R-1 of op(A) B, op(A) = A or A^T, all LD lanes, handed to f(row, that row's vectors): each row of B is
// loaded once for R multiply-adds, and R accumulation chains run side by side. K > 0 fixes the inner dimension
// W = K at compile time (every loop unrolls; with R = K all rows accumulate at once).
template <typename T, int LD, bool TA, int R, int K = 0, typename F>
inline void gemm_rows(const T* __restrict A, const T* __restrict B, int W, int i, F&& f) {
  using S = Simd<T, LD>;
  using V = typename S::V;
  constexpr int NV = S::NV;
  V acc[R][NV] = {};
  const int kw = K > 0 ? K : W;
  // A fixed inner dimension unrolls whole; a run-time one by two only (wider unrolling multiplied the code, and the
  // build time, for little speed).
#pragma GCC unroll 2
  for (int k = 0; k < kw; ++k) {
    V b[NV];  // loaded vector by vector: one memcpy of the array became 16-byte moves through the stack, and the
    // wider loads after them stalled on store forwarding (AVX2: 5x slower)
    for (int v = 0; v < NV; ++v) b[v] = vload<T, LD>(B + k * LD + v * S::NL);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const T a = TA ? A[k * LD + i + r] : A[(i + r) * LD + k];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r) f(i + r, acc[r]);
}

// f(row, vectors) for rows i..rows-1 of op(A) B, RB rows at a time (as many as keep RB x NV accumulators in half
// the vector registers, at most 4), then the rest.
template <typename T, int LD, bool TA, int K = 0, typename F>
inline void gemm_rows_from(const T* __restrict A, const T* __restrict B, int W, int i, int rows, F&& f) {
  constexpr int NV = Simd<T, LD>::NV;
  constexpr int RB = INTERP_VECTOR_REGS / 2 / NV >= 4 ? 4 : INTERP_VECTOR_REGS / 2 / NV >= 2 ? 2 : 1;
  for (; i + RB <= rows; i += RB) gemm_rows<T, LD, TA, RB, K>(A, B, W, i, f);
  if constexpr (RB == 4) {
    switch (rows - i) {
      case 3: gemm_rows<T, LD, TA, 3, K>(A, B, W, i, f); break;
      case 2: gemm_rows<T, LD, TA, 2, K>(A, B, W, i, f); break;
      case 1: gemm_rows<T, LD, TA, 1, K>(A, B, W, i, f); break;
      default: break;
    }
  } else if constexpr (RB == 2) {
    if (rows - i == 1) gemm_rows<T, LD, TA, 1, K>(A, B, W, i, f);
  }
}

// f(row, that row's vectors) for every row < W of the W x W product op(A) B (stored in rows of LD lanes; lanes
// W..LD-1 of A and B are zero).
template <typename T, int LD, bool TA, typename F>
inline void gemm_each(const T* __restrict A, const T* __restrict B, int W, F&& f) {
  if constexpr (LD == 16) {  // the paper's d = 10 (W = 12): the inner dimension fixed, and all rows at once where
    // their accumulators fit in the registers (AVX-512; with AVX2's 16 registers they spilled: 2.9x slower)
    constexpr bool all_rows = 12 * Simd<T, LD>::NV <= INTERP_VECTOR_REGS - 4;
    if (W == 12) {
      if constexpr (all_rows) return gemm_rows<T, LD, TA, 12, 12>(A, B, 12, 0, f);
      else return gemm_rows_from<T, LD, TA, 12>(A, B, 12, 0, 12, f);
    }
  }
  gemm_rows_from<T, LD, TA>(A, B, W, 0, W, f);
}

// f(row, vectors) that stores the vectors into row `row` of C (ACC: adds them to it).
template <typename T, int LD, bool ACC>
inline auto into_rows(T* __restrict C) {
  return [C](int row, const typename Simd<T, LD>::V* acc) {
    using V = typename Simd<T, LD>::V;
    constexpr int NV = Simd<T, LD>::NV;
    T* c = C + row * LD;
    constexpr int NL = Simd<T, LD>::NL;
    for (int v = 0; v < NV; ++v) vstore<T, LD>(c + v * NL, ACC ? vload<T, LD>(c + v * NL) + acc[v] : acc[v]);
  };
}

// C (=, +=) op(A) B for W x W matrices.
template <typename T, int LD, bool TA, bool ACC>
inline void gemm(T* __restrict C, const T* __restrict A, const T* __restrict B, int W) {
  gemm_each<T, LD, TA>(A, B, W, into_rows<T, LD, ACC>(C));
}

template <typename T, int LD>
inline void mm(T* __restrict C, const T* __restrict A, const T* __restrict B, int W) {  // C = A B
  gemm<T, LD, false, false>(C, A, B, W);
}

template <typename T, int LD, bool ACC>
inline void mtm(T* __restrict C, const T* __restrict A, const T* __restrict B, int W) {  // C (+)= A^T B
  gemm<T, LD, true, ACC>(C, A, B, W);
}

template <typename T, int LD>
inline void mm_acc(T* __restrict C, const T* __restrict A, const T* __restrict B, int W) {  // C += A B
  gemm<T, LD, false, true>(C, A, B, W);
}

// One butterfly stage of a transpose of LD x LD lanes held one row per vector: rows i and i + b exchange their
// off-diagonal b x b blocks (stages b = LD/2, ..., 1 transpose the whole matrix).
template <typename V, int LD, int b, size_t... I>
inline V shuffle_lo(V x, V y, std::index_sequence<I...>) {
  return __builtin_shufflevector(x, y, ((I & b) ? int(I) - b + LD : int(I))...);
}
template <typename V, int LD, int b, size_t... I>
inline V shuffle_hi(V x, V y, std::index_sequence<I...>) {
  return __builtin_shufflevector(x, y, ((I & b) ? int(I) + LD : int(I) + b)...);
}
template <typename V, int LD, int b>
inline void butterfly(V* r) {
  for (int i = 0; i < LD; ++i) {
    if (i & b) continue;
    const V x = r[i], y = r[i + b];
    r[i] = shuffle_lo<V, LD, b>(x, y, std::make_index_sequence<LD>{});
    r[i + b] = shuffle_hi<V, LD, b>(x, y, std::make_index_sequence<LD>{});
  }
  if constexpr (b > 1) butterfly<V, LD, b / 2>(r);
}

// The rows of C^T in registers, one vector each, for W x W C in rows of one vector (lanes W..LD-1 of C zero).
template <typename T, int LD>
inline void transposed_rows(typename Simd<T, LD>::V* r, const T* __restrict C, int W) {
  for (int i = 0; i < LD; ++i) {
    if (i < W) std::memcpy(&r[i], C + i * LD, sizeof(r[i]));
    else r[i] = typename Simd<T, LD>::V{};
  }
  butterfly<typename Simd<T, LD>::V, LD, LD / 2>(r);
}

// Ct = C^T for W x W (rows < W written; lanes W..LD-1 of C are zero, so those of Ct are too).
template <typename T, int LD>
inline void transpose(T* __restrict Ct, const T* __restrict C, int W) {
  using S = Simd<T, LD>;
  if constexpr (S::NV == 1) {  // one vector per row: in registers, by shuffles
    typename S::V r[LD];
    transposed_rows<T, LD>(r, C, W);
    for (int i = 0; i < W; ++i) std::memcpy(Ct + i * LD, &r[i], sizeof(r[i]));
  } else {
    for (int i = 0; i < W; ++i)
      for (int j = 0; j < W; ++j) Ct[i * LD + j] = C[j * LD + i];
  }
}

// C += A + A^T for W x W (lanes W..LD-1 of A zero): G' = N G N^T + R + R^T without storing R^T.
template <typename T, int LD>
inline void add_sym(T* __restrict C, const T* __restrict A, int W) {
  using S = Simd<T, LD>;
  if constexpr (S::NV == 1) {  // A^T in registers, added row by row
    typename S::V t[LD];
    transposed_rows<T, LD>(t, A, W);
    for (int i = 0; i < W; ++i) vstore<T, LD>(C + i * LD, vload<T, LD>(C + i * LD) + vload<T, LD>(A + i * LD) + t[i]);
  } else {
    for (int i = 0; i < W; ++i)
      for (int j = 0; j < W; ++j) C[i * LD + j] += A[i * LD + j] + A[j * LD + i];
  }
}

template <typename T>
struct Args {
  int64_t D, L, H, b0, b1, n;
  const T* S0;  // [B, D, D], or null: built from the draw (fused mode)
  const T* q0;  // [B, D]
  const T* P;   // FULL: [L, H, W, LD] zero-padded P_k;  DIAG: Omega [L, W, LD] (call() builds it from omega)
  const T* Q;   // FULL: [L, H, W, LD] zero-padded Q_k;  DIAG: Omega^T [L, W, LD] (likewise)
  const T* Pt;  // FULL: [L, H, W, LD] P_k^T;            DIAG: unused
  T* y;         // [B] forward: the prediction;  fused: the half squared error l_b = v_b (y-hat_b - y_q,b)^2 / 2
  const T* gy;  // [B] d/dy (backward)
  T* dP;        // backward, this call's partial sums. FULL: dP_k [L, H, W, LD];  DIAG: dOmega^T [L, W, LD] (call()
                // sums its blocks into d/d omega)
  T* dQt;       // FULL: dQ_k^T [L, H, W, LD]
  T* G0;        // [B, W, LD] G at the input, or null when the input needs no gradient
  const T* x;       // fused, the draw: context inputs [B, n, d] (d = D - 1)
  const T* xq;      // fused: the query input [B, d]
  const T* w;       // fused: the task's weights [B, d]
  const T* sigma;   // fused: the noise std [B]
  const T* xi;      // fused: the standard normal noise [B, n]: y_i = <w, x_i> + sigma xi_i
  const T* weight;  // fused: [B] importance weights v_b, or null for 1
  T* c;             // fused: [B] the loss term of each sequence (see fused())
  T cap;            // fused: the robust guard's cap, used when robust
  int robust;       // fused: 1 for the trainer's robust guard, 0 for the plain half squared error
};

// One sequence's forward state, reused from sequence to sequence so that it stays in L1: S-hat^l for every
// layer, N^l, for FULL Y_k^l = Q_k^T S-hat^l; the last layer's A^T[:, y] and S-hat p_k.
template <typename T>
struct Seq {
  int64_t M;
  std::vector<T> S, N, Y, T_, ay, v, q, E, xt, I;  // xt: the last sequence's x, copied (forward_seq)
  T target;  // fused: <w, x_q>
  Seq(int64_t L, int64_t H, int64_t W, int64_t LD, bool full, int64_t n = 0)
      : M(W * LD), S(L * M, T(0)), N(L * M, T(0)), Y(full ? L * H * M : 0, T(0)), T_(M, T(0)),
        ay(LD, T(0)), v(H * LD, T(0)), q(LD, T(0)), E(n * LD, T(0)), xt(n * (W - 2) + LD, T(0)), I(M, T(0)),
        target(0) {
    for (int64_t i = 0; i < W; ++i) I[i * LD + i] = T(1);
  }
};

// y-hat of sequence b; fills st.
template <typename T, int LD, bool FULL>
T forward_seq(const Args<T>& a, int64_t b, Seq<T>& st) {
  const int64_t D = a.D, W = D + 1, L = a.L, H = a.H, d = D - 1, M = W * LD;
  // Rows are written whole, as vectors (sums of identity rows where entries are placed one by one): a vector load
  // right after scalar stores into the same row cannot be forwarded and stalls (measured ~30 ns a row).
  using V = typename Simd<T, LD>::V;
  constexpr int NV = Simd<T, LD>::NV, NL = Simd<T, LD>::NL;
  const T* I = st.I.data();
  T* S = st.S.data();  // S-hat^0 = [[S, e_q], [e_q^T, 0]]
  const T* q0;
  if (a.S0) {
    const T* s0 = a.S0 + b * D * D;
    q0 = a.q0 + b * D;
    std::memset(S, 0, sizeof(T) * M);
    for (int64_t i = 0; i < D; ++i) std::memcpy(S + i * LD, s0 + i * D, sizeof(T) * D);
  } else {  // from the draw: S = E^T E over e_j = (x_j, y_j), y_j = <w, x_j> + sigma xi_j (the query is not a key)
    // as S = A^T G A with G = Z^T Z over z_j = (x_j, xi_j) and A = [[I, w], [0, sigma]] (e_j = A^T z_j): the rows
    // z_j are whole vectors (x_j's lanes, then xi_j), so no label is formed and no row is written entry by entry.
    const T* x = a.x + b * a.n * d;
    const T* w = a.w + b * d;
    const T* xi = a.xi + b * a.n;
    const T sigma = a.sigma[b];
    T* E = st.E.data();  // the rows z_j, n rows of LD lanes; lanes beyond D stay zero
    // A vector load of x_j reads up to LD - 1 entries past it: within the draw except at its very end, so the
    // batch's last sequence copies its rows first.
    const T* xs = x;
    if (b == a.b1 - 1) {
      std::memcpy(st.xt.data(), x, sizeof(T) * a.n * d);  // the entries after them stay zero
      xs = st.xt.data();
    }
    V lane;  // 0, 1, ..., NL - 1
    for (int k = 0; k < NL; ++k) lane[k] = T(k);
    for (int64_t j = 0; j < a.n; ++j)
      for (int v = 0; v < NV; ++v) {
        V r{};
        if (v * NL < d) r = lane < T(d - v * NL) ? vload<T, LD>(xs + j * d + v * NL) : V{};
        vstore<T, LD>(E + j * LD + v * NL, r + xi[j] * vload<T, LD>(I + d * LD + v * NL));
      }
    // rows < D of G = Z^T Z (lanes >= D zero)
    gemm_rows_from<T, LD, true>(E, E, int(a.n), 0, int(D), into_rows<T, LD, false>(S));
    // u = G A[:, d] = sum_i w_i G[i] + sigma G[d]: lanes < d are S[:d, d] = X^T y; S[d, d] = sum_i w_i u_i + sigma u_d
    V u[NV];
    for (int v = 0; v < NV; ++v) {
      V r = sigma * vload<T, LD>(S + d * LD + v * NL);
      for (int64_t k = 0; k < d; ++k) r += w[k] * vload<T, LD>(S + k * LD + v * NL);
      u[v] = r;
    }
    T uu[LD];
    std::memcpy(uu, u, sizeof uu);
    T syy = sigma * uu[d];
    for (int64_t k = 0; k < d; ++k) syy += w[k] * uu[k];
    for (int v = 0; v < NV; ++v) {  // lane d of rows < d becomes u_i; row d becomes u with lane d = S[d, d]
      const V unit = vload<T, LD>(I + d * LD + v * NL);
      for (int64_t k = 0; k < d; ++k) {
        T* row = S + k * LD + v * NL;
        vstore<T, LD>(row, vload<T, LD>(row) + (uu[k] - S[k * LD + d]) * unit);
      }
      vstore<T, LD>(S + d * LD + v * NL, u[v] + (syy - uu[d]) * unit);
    }
    const T* xq = a.xq + b * d;
    T* q = st.q.data();  // the query token (x_q, 0)
    T target = 0;
    for (int64_t i = 0; i < d; ++i) target += xq[i] * w[i];  // y_q = <w, x_q>, the noise-free label
    for (int v = 0; v < NV; ++v) {
      V r{};
      for (int64_t i = 0; i < d; ++i) r += xq[i] * vload<T, LD>(I + i * LD + v * NL);
      vstore<T, LD>(q + v * NL, r);
    }
    st.target = target;
    q0 = q;
    vstore<T, LD>(S + D * LD, V{});  // row D, filled below (rows < D are E^T E, lanes >= D zero)
    for (int v = 1; v < NV; ++v) vstore<T, LD>(S + D * LD + v * NL, V{});
  }
  for (int v = 0; v < NV; ++v) {  // column D: e_q; row D: e_q^T
    const V unit = vload<T, LD>(I + D * LD + v * NL);
    V r = vload<T, LD>(S + D * LD + v * NL);
    for (int64_t i = 0; i < D; ++i) {
      vstore<T, LD>(S + i * LD + v * NL, vload<T, LD>(S + i * LD + v * NL) + q0[i] * unit);
      r += q0[i] * vload<T, LD>(I + i * LD + v * NL);
    }
    vstore<T, LD>(S + D * LD + v * NL, r);
  }
  for (int64_t l = 0; l + 1 < L; ++l) {
    const T* Sl = S + l * M;
    T* N = st.N.data() + l * M;
    if (FULL) {  // N = I + sum_k (Q_k^T S) P_k^T
      for (int64_t k = 0; k < H; ++k) {
        T* Y = st.Y.data() + (l * H + k) * M;
        mtm<T, LD, false>(Y, a.Q + (l * H + k) * M, Sl, W);
        if (k == 0) mm<T, LD>(N, Y, a.Pt + (l * H + k) * M, W);
        else mm_acc<T, LD>(N, Y, a.Pt + (l * H + k) * M, W);
      }
      rowwise<T, LD>(W, [&](int o) { vstore<T, LD>(N + o, vload<T, LD>(N + o) + vload<T, LD>(I + o)); });
    } else {  // N = I + S (.) Omega^T
      const T* OmT = a.Q + l * M;
      rowwise<T, LD>(W, [&](int o) {
        vstore<T, LD>(N + o, vload<T, LD>(Sl + o) * vload<T, LD>(OmT + o) + vload<T, LD>(I + o));
      });
    }
    mm<T, LD>(st.T_.data(), Sl, N, W);                      // S N
    mtm<T, LD, false>(S + (l + 1) * M, N, st.T_.data(), W);  // N^T S N
  }
  const T* Sl = S + (L - 1) * M;
  T* ay = st.ay.data();
  if (FULL) {  // A^T[:, y] = sum_k Q_k^T (S p_k), p_k = row y of P_k
    std::memset(ay, 0, sizeof(T) * LD);
    for (int64_t k = 0; k < H; ++k) {
      const T* p = a.P + ((L - 1) * H + k) * M + d * LD;
      const T* Qk = a.Q + ((L - 1) * H + k) * M;
      T* v = st.v.data() + k * LD;
      std::memset(v, 0, sizeof(T) * LD);
      for (int64_t j = 0; j < W; ++j)
        for (int i = 0; i < LD; ++i) v[i] += p[j] * Sl[j * LD + i];
      for (int64_t j = 0; j < W; ++j)
        for (int i = 0; i < LD; ++i) ay[i] += v[j] * Qk[j * LD + i];
    }
  } else {  // A^T[:, y] = S[:, y] (.) Omega[y]
    const T* om = a.P + (L - 1) * M + d * LD;
    for (int i = 0; i < LD; ++i) ay[i] = Sl[d * LD + i] * om[i];
  }
  const T* q = Sl + D * LD;  // row D = the query column
  T acc = q[d];
  for (int64_t i = 0; i < W; ++i) acc += ay[i] * q[i];
  return -acc;  // y-hat = -(e_q + A e_q)_y
}

template <typename T, int LD, bool FULL>
void forward(const Args<T>& a) {
  Seq<T> st(a.L, a.H, a.D + 1, LD, FULL, a.n);
  for (int64_t b = a.b0; b < a.b1; ++b) a.y[b] = forward_seq<T, LD, FULL>(a, b, st);
}

// Buffers of one sequence's backward, reused from sequence to sequence.
template <typename T>
struct Grad {
  std::vector<T> buf;
  T *G, *Gn, *U, *dN, *Nt, *X, *R, *av, *dq, *w;
  Grad(int64_t W, int64_t LD) : buf(7 * W * LD + 3 * LD, T(0)) {
    const int64_t M = W * LD;
    G = buf.data(), Gn = G + M, U = Gn + M, dN = U + M, Nt = dN + M, X = Nt + M, R = X + M;
    av = R + M, dq = av + LD, w = dq + LD;
  }
};

// Adds sequence b's parameter gradients, for d/dy-hat = gy, into a.dP (a.dQt) and writes G at its input into
// a.G0 when that is not null; st holds the sequence's forward (forward_seq).
template <typename T, int LD, bool FULL>
void backward_seq(const Args<T>& a, int64_t b, const Seq<T>& st, Grad<T>& g, T gy) {
  const int64_t D = a.D, W = D + 1, L = a.L, H = a.H, d = D - 1, M = W * LD;
  T *G = g.G, *Gn = g.Gn, *U = g.U, *dN = g.dN, *Nt = g.Nt, *X = g.X, *R = g.R;
  T *av = g.av, *dq = g.dq, *w = g.w;
  const bool need_input = a.G0 != nullptr;
  const T* S = st.S.data();
  const T* Sl = S + (L - 1) * M;
  const T* q = Sl + D * LD;  // row D = the query column
  const T* ay = st.ay.data();
  using V = typename Simd<T, LD>::V;
  constexpr int NV = Simd<T, LD>::NV, NL = Simd<T, LD>::NL;
  const T* I = st.I.data();
  for (int v = 0; v < NV; ++v) {  // whole vectors, as in forward_seq
    const int o = v * NL;
    vstore<T, LD>(av + o, -gy * vload<T, LD>(q + o));                                      // d/d(A^T[:, y])
    vstore<T, LD>(dq + o, -gy * (vload<T, LD>(ay + o) + vload<T, LD>(I + d * LD + o)));  // d/d(query column)
  }
  // G = 2 sym(d/dS-hat) at the last layer: dq e_D^T + e_D dq^T, plus the A^T[:, y] terms, built row by row
  for (int64_t i = 0; i < W; ++i)
    for (int v = 0; v < NV; ++v) vstore<T, LD>(G + i * LD + v * NL, dq[i] * vload<T, LD>(I + D * LD + v * NL));
  for (int v = 0; v < NV; ++v)
    vstore<T, LD>(G + D * LD + v * NL, vload<T, LD>(G + D * LD + v * NL) + vload<T, LD>(dq + v * NL));
  if (FULL) {
    for (int64_t k = 0; k < H; ++k) {
      const T* Pk = a.P + ((L - 1) * H + k) * M;
      const T* Qk = a.Q + ((L - 1) * H + k) * M;
      const T* v = st.v.data() + k * LD;
      for (int64_t i = 0; i < W; ++i) {  // w = Q_k a
        T s = 0;
        for (int64_t j = 0; j < W; ++j) s += Qk[i * LD + j] * av[j];
        w[i] = s;
      }
      T* dPk = a.dP + ((L - 1) * H + k) * M + d * LD;  // row y of dP_k += (S w)^T
      for (int64_t j = 0; j < W; ++j)
        for (int i = 0; i < LD; ++i) dPk[i] += w[j] * Sl[j * LD + i];
      T* dQk = a.dQt + ((L - 1) * H + k) * M;  // dQ_k^T += a v^T
      const T* p = Pk + d * LD;
      V wv[NV] = {};  // w as vectors
      for (int64_t j = 0; j < W; ++j)
        for (int u = 0; u < NV; ++u) wv[u] += w[j] * vload<T, LD>(I + j * LD + u * NL);
      for (int64_t i = 0; i < W; ++i) {
        for (int j = 0; j < LD; ++j) dQk[i * LD + j] += av[i] * v[j];
        for (int u = 0; u < NV; ++u) {  // w p^T + p w^T
          const int o = i * LD + u * NL;
          vstore<T, LD>(G + o, vload<T, LD>(G + o) + w[i] * vload<T, LD>(p + u * NL) + p[i] * wv[u]);
        }
      }
    }
  } else {
    const T* om = a.P + (L - 1) * M + d * LD;
    T* dOmT = a.dP + (L - 1) * M;  // row y of dOmega = column y of the transposed accumulator
    for (int64_t i = 0; i < W; ++i) dOmT[i * LD + d] += av[i] * Sl[d * LD + i];
    for (int v = 0; v < NV; ++v) {  // u = a (.) omega_y: u e_y^T + e_y u^T
      const V u = vload<T, LD>(av + v * NL) * vload<T, LD>(om + v * NL), unit = vload<T, LD>(I + d * LD + v * NL);
      for (int64_t i = 0; i < W; ++i)
        vstore<T, LD>(G + i * LD + v * NL, vload<T, LD>(G + i * LD + v * NL) + (av[i] * om[i]) * unit);
      vstore<T, LD>(G + d * LD + v * NL, vload<T, LD>(G + d * LD + v * NL) + u);
    }
  }
  for (int64_t l = L - 2; l >= 0; --l) {
    const T* Sc = S + l * M;
    const bool next = l > 0 || need_input;
    const T* N;
    if (FULL) {
      N = st.N.data() + l * M;
      if (next) transpose<T, LD>(Nt, N, W);
    } else {  // N as the forward left it; N^T = I + S (.) Omega
      N = st.N.data() + l * M;
      const T* Om = a.P + l * M;
      const T* I = st.I.data();
      if (next)
        rowwise<T, LD>(W, [&](int o) {
          vstore<T, LD>(Nt + o, vload<T, LD>(Sc + o) * vload<T, LD>(Om + o) + vload<T, LD>(I + o));
        });
    }
    mm<T, LD>(U, N, G, W);  // N G
    if (FULL) mm<T, LD>(dN, Sc, U, W);  // d/dN of N^T S N: S N G (G = 2 sym(d/dS'))
    if (next) mm<T, LD>(Gn, U, Nt, W);  // through S directly: N G N^T
    if (FULL) {  // A^T = sum_k Q_k^T S P_k^T
      for (int64_t k = 0; k < H; ++k) {
        const T* Pk = a.P + (l * H + k) * M;
        const T* Qk = a.Q + (l * H + k) * M;
        mm<T, LD>(X, dN, Pk, W);                           // X = dN P_k
        mm_acc<T, LD>(a.dQt + (l * H + k) * M, X, Sc, W);  // dQ_k^T += X S
        mtm<T, LD, true>(a.dP + (l * H + k) * M, dN, st.Y.data() + (l * H + k) * M, W);  // dP_k += dN^T Y_k
        if (next) {  // R^T = Q_k X, summed over heads
          if (k == 0) mm<T, LD>(R, Qk, X, W);
          else mm_acc<T, LD>(R, Qk, X, W);
        }
      }
    } else {  // A^T = S (.) Omega^T: each row of dN = S U as it is computed, never stored
      const T* OmT = a.Q + l * M;
      T* dOmT = a.dP + l * M;
      constexpr int NV = Simd<T, LD>::NV, NL = Simd<T, LD>::NL;
      gemm_each<T, LD, false>(Sc, U, W, [&](int i, const auto* n) {
        for (int v = 0; v < NV; ++v) {
          const int o = i * LD + v * NL;
          vstore<T, LD>(dOmT + o, vload<T, LD>(dOmT + o) + n[v] * vload<T, LD>(Sc + o));
          vstore<T, LD>(R + o, n[v] * vload<T, LD>(OmT + o));  // dA^T (.) Omega^T
        }
      });
    }
    if (next) {  // G' = N G N^T + R + R^T
      add_sym<T, LD>(Gn, R, W);
      std::swap(G, Gn);
    }
  }
  if (need_input) std::memcpy(a.G0 + b * M, G, sizeof(T) * M);
}

template <typename T, int LD, bool FULL>
void backward(const Args<T>& a) {
  Seq<T> st(a.L, a.H, a.D + 1, LD, FULL);
  Grad<T> g(a.D + 1, LD);
  for (int64_t b = a.b0; b < a.b1; ++b) {
    const T gy = a.gy[b];
    if (gy == T(0) && a.G0 == nullptr) continue;  // e.g. a sequence the training guard left out
    forward_seq<T, LD, FULL>(a, b, st);
    backward_seq<T, LD, FULL>(a, b, st, g, gy);
  }
}

// Training mode: per sequence, the forward from its draw, l = v (y-hat - y_q)^2 / 2 into a.y, the loss term
// c into a.c, and the parameter gradients of c, from the layers still in cache. Plain (robust = 0): c = l. The
// trainer's robust guard (interp.train.robust_half_se): c = 0 for a non-finite l (the sequence is left out),
// cap (1 + log(l / cap)) above the cap, l below.
template <typename T, int LD, bool FULL>
void fused(const Args<T>& a) {
  Seq<T> st(a.L, a.H, a.D + 1, LD, FULL, a.n);
  Grad<T> g(a.D + 1, LD);
  for (int64_t b = a.b0; b < a.b1; ++b) {
    const T e = forward_seq<T, LD, FULL>(a, b, st) - st.target;
    const T wb = a.weight ? a.weight[b] : T(1);
    const T l = T(0.5) * (e * e) * wb;
    T c = l, dc = e * wb;  // dc = dc/dy-hat
    if (a.robust && !std::isfinite(l)) {
      c = dc = T(0);
    } else if (a.robust && l > a.cap) {
      c = a.cap * (T(1) + std::log(l / a.cap));
      dc *= a.cap / l;
    }
    a.y[b] = l;
    a.c[b] = c;
    if (dc != T(0)) backward_seq<T, LD, FULL>(a, b, st, g, dc);
  }
}

template <typename T, int LD, bool FULL>
void run(int mode, const Args<T>& a) {
  if (mode == 0) forward<T, LD, FULL>(a);
  else if (mode == 1) backward<T, LD, FULL>(a);
  else fused<T, LD, FULL>(a);
}

// DIAG's Omega^l and its transpose [L, W, LD] from omega [L, 4] = (omega_xx, omega_xy, omega_yx, omega_yy): the
// blocks (d, 1) x (d, 1), zero in the query's row and column and beyond (interp.moments.omega_matrix).
template <typename T>
void omega_matrices(const T* omega, int64_t L, int64_t D, int64_t LD, T* Om, T* OmT) {
  const int64_t d = D - 1, M = (D + 1) * LD;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t i = 0; i < D; ++i)
      for (int64_t j = 0; j < D; ++j) {
        const T o = omega[l * 4 + (i < d ? 0 : 2) + (j < d ? 0 : 1)];
        Om[l * M + i * LD + j] = o;
        OmT[l * M + j * LD + i] = o;
      }
}

// d/d omega [L, 4] += the block sums of d/d Omega, from its transpose dOmT [L, W, LD].
template <typename T>
void omega_grad(const T* dOmT, int64_t L, int64_t D, int64_t LD, T* domega) {
  const int64_t d = D - 1, M = (D + 1) * LD;
  for (int64_t l = 0; l < L; ++l) {
    const T* g = dOmT + l * M;  // g[j][i] = d/d Omega[i][j]
    T xx = 0, xy = 0, yx = 0;
    for (int64_t j = 0; j < d; ++j) {
      for (int64_t i = 0; i < d; ++i) xx += g[j * LD + i];
      yx += g[j * LD + d];  // Omega[d][j]
      xy += g[d * LD + j];  // Omega[j][d]
    }
    domega[l * 4 + 0] += xx, domega[l * 4 + 1] += xy, domega[l * 4 + 2] += yx, domega[l * 4 + 3] += g[d * LD + d];
  }
}

template <typename T>
int call(int mode, int full, const int64_t* dims, void* const* p, double cap, int robust) {
  // dims: ld, D, L, H, b0, b1, n.  p: S0, q0, P, Q, Pt, y, gy, dP, dQt, G0, x, xq, w, sigma, xi, weight, c
  // (DIAG: P is omega [L, 4], Q and Pt unused, dP is d/d omega [L, 4])
  Args<T> a{dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], (const T*)p[0], (const T*)p[1], (const T*)p[2],
            (const T*)p[3], (const T*)p[4], (T*)p[5], (const T*)p[6], (T*)p[7], (T*)p[8], (T*)p[9],
            (const T*)p[10], (const T*)p[11], (const T*)p[12], (const T*)p[13], (const T*)p[14],
            (const T*)p[15], (T*)p[16], T(cap), robust};
  const int64_t ld = dims[0], M = (a.D + 1) * ld;
  std::vector<T> om, dom;  // DIAG: Omega and Omega^T, then dOmega^T
  T* domega = nullptr;
  if (!full) {
    om.assign(2 * a.L * M, T(0));
    omega_matrices(a.P, a.L, a.D, ld, om.data(), om.data() + a.L * M);
    a.P = om.data(), a.Q = om.data() + a.L * M;
    if (mode != 0) {
      dom.assign(a.L * M, T(0));
      domega = a.dP, a.dP = dom.data();
    }
  }
  auto go = [&](auto ld) {
    constexpr int LD = decltype(ld)::value;
    full ? run<T, LD, true>(mode, a) : run<T, LD, false>(mode, a);
    return 0;
  };
  int code = 1;
  switch (ld) {
    case 8: code = go(std::integral_constant<int, 8>{}); break;
    case 16: code = go(std::integral_constant<int, 16>{}); break;
    case 32: code = go(std::integral_constant<int, 32>{}); break;
    case 64: code = go(std::integral_constant<int, 64>{}); break;
    default: break;
  }
  if (code == 0 && domega) omega_grad(dom.data(), a.L, a.D, ld, domega);
  return code;
}

}  // namespace

extern "C" {

// The version of this library's interface; interp.kernel loads no file that answers otherwise.
int interp_moments_abi() { return 6; }

// The instruction set this build's vectors were compiled for (setup.py): "avx512", "avx2" or "portable".
const char* interp_moments_isa() { return INTERP_ISA; }
int interp_moments_vector_bytes() { return INTERP_VECTOR_BYTES; }

// dtype: 0 float32, 1 float64; mode: 0 forward (writes y), 1 backward (reads gy, adds into dP, dQt, writes G0 if
// not null), 2 fused training pass (reads x, xq, w, sigma, xi, weight; writes y, c; adds into dP, dQt);
// full: 1 FULL, 0 DIAG (P: omega [L, 4]; dP: d/d omega [L, 4]). dims and p as in call(). Returns 0, or 1 for a row
// length that was not compiled.
int interp_moments(int dtype, int mode, int full, const int64_t* dims, void* const* p, double cap, int robust) {
  if (dtype == 0) return call<float>(mode, full, dims, p, cap, robust);
  return call<double>(mode, full, dims, p, cap, robust);
}

}  // extern "C"
