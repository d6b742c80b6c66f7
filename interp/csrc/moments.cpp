// Fused CPU kernel of interp.moments.MomentRecursion: the whole layer recursion of one sequence at a time, its
// matrices kept in L1 cache, forward and hand-written backward (Vladymyrov et al. 2024, Theorem 4.1):
//     S^{l+1} = N^T S^l N  with  N = I + A^T,  A = sum_k P_k S Q_k  (FULL)  or  A = S (.) Omega  (DIAG / GD++).
// The carried matrix is S-hat = [[S, e_q], [e_q^T, 0]] of width W = D + 1 <= LD, each row stored in LD lanes
// (columns W..LD-1 are zero, so every row is one or a few SIMD vectors of compile-time length).
// Nothing per sequence is kept between the forward and the backward call: the backward recomputes each
// sequence's forward in L1 before differentiating it. Keeping the layers instead cost more (2048 sequences of
// a 7-layer model are 11-33 MB, far beyond L2; measured 1.3-2.5x slower per sequence than in cache).
// Plain C ABI, called through ctypes with the data pointers of contiguous torch tensors; a call handles the
// sequences [b0, b1), so Python threads can split a batch (ctypes releases the GIL during the call).
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace {

// A row of LD lanes as NV vectors of NL lanes (GCC/Clang vector extensions; one AVX-512 register per vector).
template <typename T, int LD>
struct Simd {
  static constexpr int VB = LD * int(sizeof(T)) < 64 ? LD * int(sizeof(T)) : 64;
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

// Rows i..i+R-1 of C (=, +=) op(A) B with op(A) = A or A^T, all LD lanes: each row of B is loaded once for R
// multiply-adds, and R accumulation chains run side by side. K > 0 fixes W = K at compile time (every loop
// unrolls; with R = K all rows of C accumulate at once).
template <typename T, int LD, bool TA, bool ACC, int R, int K = 0>
inline void gemm_rows(T* __restrict C, const T* __restrict A, const T* __restrict B, int W, int i) {
  using S = Simd<T, LD>;
  using V = typename S::V;
  constexpr int NV = S::NV;
  const int kw = K > 0 ? K : W;
  V acc[R][NV] = {};
#pragma GCC unroll 16
  for (int k = 0; k < kw; ++k) {
    V b[NV];
    std::memcpy(b, B + k * LD, sizeof b);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const T a = TA ? A[k * LD + i + r] : A[(i + r) * LD + k];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r) {
    T* c = C + (i + r) * LD;
    if (ACC) {
      V cv[NV];
      std::memcpy(cv, c, sizeof cv);
      for (int v = 0; v < NV; ++v) cv[v] += acc[r][v];
      std::memcpy(c, cv, sizeof cv);
    } else {
      std::memcpy(c, acc[r], sizeof acc[r]);
    }
  }
}

// C (=, +=) op(A) B for W x W matrices stored in rows of LD lanes (lanes W..LD-1 of A and B are zero).
template <typename T, int LD, bool TA, bool ACC>
inline void gemm(T* __restrict C, const T* __restrict A, const T* __restrict B, int W) {
  if constexpr (LD == 16) {  // d = 7..14, the paper's d = 10 among them: W fixed, all rows at once
    switch (W) {
      case 9: return gemm_rows<T, LD, TA, ACC, 9, 9>(C, A, B, 9, 0);
      case 10: return gemm_rows<T, LD, TA, ACC, 10, 10>(C, A, B, 10, 0);
      case 11: return gemm_rows<T, LD, TA, ACC, 11, 11>(C, A, B, 11, 0);
      case 12: return gemm_rows<T, LD, TA, ACC, 12, 12>(C, A, B, 12, 0);
      case 13: return gemm_rows<T, LD, TA, ACC, 13, 13>(C, A, B, 13, 0);
      case 14: return gemm_rows<T, LD, TA, ACC, 14, 14>(C, A, B, 14, 0);
      case 15: return gemm_rows<T, LD, TA, ACC, 15, 15>(C, A, B, 15, 0);
      case 16: return gemm_rows<T, LD, TA, ACC, 16, 16>(C, A, B, 16, 0);
      default: break;
    }
  }
  constexpr int R = 4;
  int i = 0;
  for (; i + R <= W; i += R) gemm_rows<T, LD, TA, ACC, R>(C, A, B, W, i);
  switch (W - i) {
    case 3: gemm_rows<T, LD, TA, ACC, 3>(C, A, B, W, i); break;
    case 2: gemm_rows<T, LD, TA, ACC, 2>(C, A, B, W, i); break;
    case 1: gemm_rows<T, LD, TA, ACC, 1>(C, A, B, W, i); break;
    default: break;
  }
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

// Ct = C^T for W x W (rows < W written; lanes W..LD-1 of C are zero, so those of Ct are too).
template <typename T, int LD>
inline void transpose(T* __restrict Ct, const T* __restrict C, int W) {
  using S = Simd<T, LD>;
  if constexpr (S::NV == 1) {  // one vector per row: in registers, by shuffles
    using V = typename S::V;
    V r[LD];
    for (int i = 0; i < LD; ++i) {
      if (i < W) std::memcpy(&r[i], C + i * LD, sizeof(V));
      else r[i] = V{};
    }
    butterfly<V, LD, LD / 2>(r);
    for (int i = 0; i < W; ++i) std::memcpy(Ct + i * LD, &r[i], sizeof(V));
  } else {
    for (int i = 0; i < W; ++i)
      for (int j = 0; j < W; ++j) Ct[i * LD + j] = C[j * LD + i];
  }
}

template <typename T>
struct Args {
  int64_t B, D, L, H, b0, b1;
  const T* S0;  // [B, D, D]
  const T* q0;  // [B, D]
  const T* P;   // FULL: [L, H, W, LD] zero-padded P_k;  DIAG: Omega [L, W, LD]
  const T* Q;   // FULL: [L, H, W, LD] zero-padded Q_k;  DIAG: Omega^T [L, W, LD]
  const T* Pt;  // FULL: [L, H, W, LD] P_k^T;            DIAG: unused
  T* y;         // [B] the prediction (forward)
  const T* gy;  // [B] d/dy (backward)
  T* dP;        // backward, this call's partial sums. FULL: dP_k [L, H, W, LD];  DIAG: dOmega^T [L, W, LD]
  T* dQt;       // FULL: dQ_k^T [L, H, W, LD]
  T* G0;        // [B, W, LD] G at the input, or null when the input needs no gradient
};

// One sequence's forward state, reused from sequence to sequence so that it stays in L1: S-hat^l for every
// layer, and for FULL N^l and Y_k^l = Q_k^T S-hat^l; the last layer's A^T[:, y] and S-hat p_k.
template <typename T>
struct Seq {
  int64_t M;
  std::vector<T> S, N, Y, T_, ay, v;
  Seq(int64_t L, int64_t H, int64_t W, int64_t LD, bool full)
      : M(W * LD), S(L * M, T(0)), N(full ? L * M : M, T(0)), Y(full ? L * H * M : 0, T(0)), T_(M, T(0)),
        ay(LD, T(0)), v(H * LD, T(0)) {}
};

// y-hat of sequence b; fills st.
template <typename T, int LD, bool FULL>
T forward_seq(const Args<T>& a, int64_t b, Seq<T>& st) {
  const int64_t D = a.D, W = D + 1, L = a.L, H = a.H, d = D - 1, M = W * LD;
  T* S = st.S.data();
  std::memset(S, 0, sizeof(T) * M);  // S-hat^0 = [[S, e_q], [e_q^T, 0]]
  const T* s0 = a.S0 + b * D * D;
  const T* q0 = a.q0 + b * D;
  for (int64_t i = 0; i < D; ++i) {
    std::memcpy(S + i * LD, s0 + i * D, sizeof(T) * D);
    S[i * LD + D] = q0[i];
    S[D * LD + i] = q0[i];
  }
  for (int64_t l = 0; l + 1 < L; ++l) {
    const T* Sl = S + l * M;
    T* N = FULL ? st.N.data() + l * M : st.N.data();
    if (FULL) {  // N = I + sum_k (Q_k^T S) P_k^T
      for (int64_t k = 0; k < H; ++k) {
        T* Y = st.Y.data() + (l * H + k) * M;
        mtm<T, LD, false>(Y, a.Q + (l * H + k) * M, Sl, W);
        if (k == 0) mm<T, LD>(N, Y, a.Pt + (l * H + k) * M, W);
        else mm_acc<T, LD>(N, Y, a.Pt + (l * H + k) * M, W);
      }
    } else {  // N = I + S (.) Omega^T
      const T* OmT = a.Q + l * M;
      rowwise<T, LD>(W, [&](int o) { vstore<T, LD>(N + o, vload<T, LD>(Sl + o) * vload<T, LD>(OmT + o)); });
    }
    for (int64_t i = 0; i < W; ++i) N[i * LD + i] += T(1);
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
  Seq<T> st(a.L, a.H, a.D + 1, LD, FULL);
  for (int64_t b = a.b0; b < a.b1; ++b) a.y[b] = forward_seq<T, LD, FULL>(a, b, st);
}

template <typename T, int LD, bool FULL>
void backward(const Args<T>& a) {
  const int64_t D = a.D, W = D + 1, L = a.L, H = a.H, d = D - 1, M = W * LD;
  Seq<T> st(L, H, W, LD, FULL);
  std::vector<T> buf(8 * M + 3 * LD, T(0));
  T *G = buf.data(), *Gn = G + M, *U = Gn + M, *dN = U + M, *Nt = dN + M, *X = Nt + M, *R = X + M, *Rt = R + M;
  T *av = Rt + M, *dq = av + LD, *w = dq + LD;
  T* Nd = X;  // DIAG rebuilds N where FULL keeps X
  const bool need_input = a.G0 != nullptr;
  for (int64_t b = a.b0; b < a.b1; ++b) {
    const T gy = a.gy[b];
    if (gy == T(0) && !need_input) continue;  // e.g. a sequence the training guard left out
    forward_seq<T, LD, FULL>(a, b, st);
    const T* S = st.S.data();
    const T* Sl = S + (L - 1) * M;
    const T* q = Sl + D * LD;  // row D = the query column
    const T* ay = st.ay.data();
    for (int i = 0; i < LD; ++i) {
      av[i] = -gy * q[i];   // d/d(A^T[:, y])
      dq[i] = -gy * ay[i];  // d/d(query column)
    }
    dq[d] -= gy;
    std::memset(G, 0, sizeof(T) * M);
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
        for (int64_t i = 0; i < W; ++i) {
          for (int j = 0; j < LD; ++j) dQk[i * LD + j] += av[i] * v[j];
          for (int j = 0; j < LD; ++j) G[i * LD + j] += w[i] * p[j] + p[i] * w[j];  // w p^T + p w^T
        }
      }
    } else {
      const T* om = a.P + (L - 1) * M + d * LD;
      T* dOmT = a.dP + (L - 1) * M;  // row y of dOmega = column y of the transposed accumulator
      for (int64_t i = 0; i < W; ++i) {
        dOmT[i * LD + d] += av[i] * Sl[d * LD + i];
        const T u = av[i] * om[i];
        G[i * LD + d] += u;
        G[d * LD + i] += u;
      }
    }
    for (int64_t i = 0; i < W; ++i) {
      G[i * LD + D] += dq[i];
      G[D * LD + i] += dq[i];
    }
    for (int64_t l = L - 2; l >= 0; --l) {
      const T* Sc = S + l * M;
      const bool next = l > 0 || need_input;
      const T* N;
      if (FULL) {
        N = st.N.data() + l * M;
        if (next) transpose<T, LD>(Nt, N, W);
      } else {  // N = I + S (.) Omega^T, N^T = I + S (.) Omega
        const T* OmT = a.Q + l * M;
        const T* Om = a.P + l * M;
        rowwise<T, LD>(W, [&](int o) {
          const auto s = vload<T, LD>(Sc + o);
          vstore<T, LD>(Nd + o, s * vload<T, LD>(OmT + o));
          vstore<T, LD>(Nt + o, s * vload<T, LD>(Om + o));
        });
        for (int64_t i = 0; i < W; ++i) {
          Nd[i * LD + i] += T(1);
          Nt[i * LD + i] += T(1);
        }
        N = Nd;
      }
      mm<T, LD>(U, N, G, W);    // N G
      mm<T, LD>(dN, Sc, U, W);  // d/dN of N^T S N: S N G (G = 2 sym(d/dS'))
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
      } else {  // A^T = S (.) Omega^T
        const T* OmT = a.Q + l * M;
        T* dOmT = a.dP + l * M;
        rowwise<T, LD>(W, [&](int o) {
          const auto n = vload<T, LD>(dN + o);
          vstore<T, LD>(dOmT + o, vload<T, LD>(dOmT + o) + n * vload<T, LD>(Sc + o));
          vstore<T, LD>(R + o, n * vload<T, LD>(OmT + o));  // dA^T (.) Omega^T
        });
      }
      if (next) {  // G' = N G N^T + R + R^T
        transpose<T, LD>(Rt, R, W);
        rowwise<T, LD>(W, [&](int o) {
          vstore<T, LD>(Gn + o, vload<T, LD>(Gn + o) + vload<T, LD>(R + o) + vload<T, LD>(Rt + o));
        });
        std::swap(G, Gn);
      }
    }
    if (need_input) std::memcpy(a.G0 + b * M, G, sizeof(T) * M);
  }
}

template <typename T, int LD>
int run(int full, int grad, const Args<T>& a) {
  if (full) {
    if (grad) backward<T, LD, true>(a);
    else forward<T, LD, true>(a);
  } else {
    if (grad) backward<T, LD, false>(a);
    else forward<T, LD, false>(a);
  }
  return 0;
}

template <typename T>
int dispatch(int64_t ld, int full, int grad, const Args<T>& a) {
  switch (ld) {
    case 8: return run<T, 8>(full, grad, a);
    case 16: return run<T, 16>(full, grad, a);
    case 32: return run<T, 32>(full, grad, a);
    case 64: return run<T, 64>(full, grad, a);
    default: return 1;
  }
}

template <typename T>
int call(int full, int grad, int64_t ld, int64_t B, int64_t D, int64_t L, int64_t H, int64_t b0, int64_t b1,
         const void* S0, const void* q0, const void* P, const void* Q, const void* Pt, void* y, const void* gy,
         void* dP, void* dQt, void* G0) {
  Args<T> a{B, D, L, H, b0, b1, (const T*)S0, (const T*)q0, (const T*)P, (const T*)Q, (const T*)Pt,
            (T*)y, (const T*)gy, (T*)dP, (T*)dQt, (T*)G0};
  return dispatch<T>(ld, full, grad, a);
}

}  // namespace

extern "C" {

// dtype: 0 float32, 1 float64; full: 1 FULL, 0 DIAG; grad: 0 forward (writes y), 1 backward (reads gy, adds
// into dP, dQt, writes G0 if not null). Returns 0, or 1 for a row length ld that was not compiled.
int interp_moments(int dtype, int full, int grad, int64_t ld, int64_t B, int64_t D, int64_t L, int64_t H,
                   int64_t b0, int64_t b1, const void* S0, const void* q0, const void* P, const void* Q,
                   const void* Pt, void* y, const void* gy, void* dP, void* dQt, void* G0) {
  if (dtype == 0) return call<float>(full, grad, ld, B, D, L, H, b0, b1, S0, q0, P, Q, Pt, y, gy, dP, dQt, G0);
  return call<double>(full, grad, ld, B, D, L, H, b0, b1, S0, q0, P, Q, Pt, y, gy, dP, dQt, G0);
}

}  // extern "C"
