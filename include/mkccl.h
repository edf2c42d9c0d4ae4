/*
 * libmkccl — collective communication and fused communication+compute for NVIDIA Hopper GPUs.
 *
 * Conventions (the same as NCCL's where NCCL has one):
 *  - Every function returns an mkcclResult_t. A caller's mistake returns mkcclInvalidArgument or
 *    mkcclInvalidUsage; the reason is logged with MKCCL_DEBUG=WARN and returned by
 *    mkcclGetLastError().
 *  - Operations that take a cudaStream_t are stream-ordered: they return once the work is enqueued.
 *    An error that happens on the device (a peer that never arrives, a wait that times out) is
 *    reported by mkcclCommGetAsyncError() and by every later call on that communicator.
 *  - All calls on one communicator must be made in the same order on every rank, and must not run
 *    concurrently with each other (as with NCCL). Each call gets a 64-bit sequence number.
 *  - Row-major matrices. Weights are stored as W[N, K] (K contiguous) and fused ops compute X · Wᵀ.
 */
#ifndef MKCCL_H_
#define MKCCL_H_

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Everything declared here is exported from libmkccl.so (the library hides all else). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define MKCCL_MAJOR 0
#define MKCCL_MINOR 1
#define MKCCL_PATCH 0
#define MKCCL_VERSION_CODE (MKCCL_MAJOR * 10000 + MKCCL_MINOR * 100 + MKCCL_PATCH)

/* ---------------------------------------------------------------------------------------------- */
/* Results, types, handles                                                                         */
/* ---------------------------------------------------------------------------------------------- */

typedef enum {
  mkcclSuccess = 0,
  mkcclUnhandledCudaError = 1, /* a CUDA call failed (driver, runtime, or a kernel fault) */
  mkcclSystemError = 2,        /* an OS call failed (socket, mmap, thread, ...) */
  mkcclInternalError = 3,      /* a bug in libmkccl */
  mkcclInvalidArgument = 4,    /* an argument is wrong (null pointer, bad size, bad handle, ...) */
  mkcclInvalidUsage = 5,       /* the call is not allowed now, or not implemented */
  mkcclRemoteError = 6,        /* another rank failed or went away */
  mkcclInProgress = 7,         /* a non-blocking operation has not finished yet */
  mkcclTimeout = 8,            /* a wait (host or device) ran past the communicator's timeout */
  mkcclNumResults = 9
} mkcclResult_t;

typedef enum {
  mkcclInt8 = 0,
  mkcclUint8 = 1,
  mkcclInt32 = 2,
  mkcclUint32 = 3,
  mkcclInt64 = 4,
  mkcclUint64 = 5,
  mkcclFloat16 = 6,
  mkcclFloat32 = 7,
  mkcclFloat64 = 8,
  mkcclBfloat16 = 9,
  mkcclFloat8e4m3 = 10,
  mkcclFloat8e5m2 = 11,
  mkcclNumTypes = 12
} mkcclDataType_t;

typedef enum { mkcclSum = 0, mkcclProd = 1, mkcclMax = 2, mkcclMin = 3, mkcclAvg = 4, mkcclNumOps = 5 } mkcclRedOp_t;

/* Opaque communicator handle. */
typedef struct mkcclComm* mkcclComm_t;

/* The rendezvous token: made once by mkcclGetUniqueId on one process and passed (by MPI, a file,
 * the mkccl-run launcher, ...) to every rank. It carries the root's address, a random token and a
 * magic/version that are checked. */
#define MKCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[MKCCL_UNIQUE_ID_BYTES];
} mkcclUniqueId;

/* Versioned communicator configuration. Initialize with MKCCL_CONFIG_INITIALIZER, then set fields.
 * A field left at MKCCL_CONFIG_UNDEF_INT takes its default (or the environment variable named). */
#define MKCCL_CONFIG_UNDEF_INT (-2147483647 - 1)
#define MKCCL_CONFIG_MAGIC 0x6d6b636cu /* 'mkcl' */
#define MKCCL_CONFIG_VERSION 2
typedef struct mkcclConfig_v2 {
  size_t size;          /* sizeof(mkcclConfig_t) */
  unsigned int magic;   /* MKCCL_CONFIG_MAGIC */
  unsigned int version; /* MKCCL_CONFIG_VERSION */
  int blocking;         /* 1 (default): init returns when done. 0: init returns mkcclInProgress
                           and finishes in the background; poll mkcclCommGetAsyncError. */
  int timeoutMs;        /* bound on every host and device wait; default MKCCL_TIMEOUT_MS or 60000 */
  int commCtas;         /* SM-split hint: CTAs given to communication in fused ops (default:
                           heuristic per shape; env MKCCL_COMM_CTAS) */
  int maxCtas;          /* upper bound on CTAs any one kernel of this comm uses (default: all SMs;
                           env MKCCL_MAX_CTAS) */
  long long workspaceBytes; /* symmetric workspace per rank (default 256 MiB; env
                               MKCCL_WORKSPACE_BYTES) */
  const char* tuning;   /* version 2: the tuner's overrides for this communicator, as for
                           mkcclSetTuning (NULL: those of the process, MKCCL_TUNING); parsed at
                           init, where a bad key is an error; the string may be freed after */
} mkcclConfig_t;

#define MKCCL_CONFIG_INITIALIZER                                                              \
  {                                                                                           \
    sizeof(mkcclConfig_t), MKCCL_CONFIG_MAGIC, MKCCL_CONFIG_VERSION, MKCCL_CONFIG_UNDEF_INT,  \
        MKCCL_CONFIG_UNDEF_INT, MKCCL_CONFIG_UNDEF_INT, MKCCL_CONFIG_UNDEF_INT,               \
        (long long)MKCCL_CONFIG_UNDEF_INT, NULL                                               \
  }

/* ---------------------------------------------------------------------------------------------- */
/* Library and errors                                                                              */
/* ---------------------------------------------------------------------------------------------- */

/* *version = MKCCL_VERSION_CODE of the library that is loaded. */
mkcclResult_t mkcclGetVersion(int* version);

/* A static string naming the result code ("invalid argument", ...). Never NULL. */
const char* mkcclGetErrorString(mkcclResult_t result);

/* The message of the last error on this thread, or for this communicator if comm is not NULL and
 * it has recorded one. Never NULL ("" when there is none). Valid until the next call. */
const char* mkcclGetLastError(mkcclComm_t comm);

/* Overrides the tuner's choices (plans, tile configurations, push paths, protocols): a string of
 * `op.key=value` items separated by ';', e.g. "ag_gemm.plan=ce;gemm_rs.push=team" (the README lists
 * the keys). comm NULL: the process's overrides, used by mkcclGemm and by communicators created
 * afterwards (they start from MKCCL_TUNING otherwise); else this communicator's, replacing what it
 * had (its cached plans are dropped). NULL or "" clears them. A key that changes what peers expect
 * of each other must be set alike on every rank, before the same call. An unknown key or value is
 * mkcclInvalidUsage naming it, and nothing changes. Not while calls on comm are being enqueued. */
mkcclResult_t mkcclSetTuning(mkcclComm_t comm, const char* tuning);

/* ---------------------------------------------------------------------------------------------- */
/* Communicators                                                                                   */
/* ---------------------------------------------------------------------------------------------- */

/* Makes a new unique id. The calling process hosts the rendezvous until every rank of the
 * communicator made with it has connected, or until the timeout (MKCCL_TIMEOUT_MS) passes. */
mkcclResult_t mkcclGetUniqueId(mkcclUniqueId* uniqueId);

/* Creates this rank's communicator on the current CUDA device. Collective: every rank of the
 * communicator must call it with the same nranks and id. */
mkcclResult_t mkcclCommInitRank(mkcclComm_t* comm, int nranks, mkcclUniqueId commId, int rank);

/* As mkcclCommInitRank, with a configuration (may be NULL for defaults). */
mkcclResult_t mkcclCommInitRankConfig(mkcclComm_t* comm, int nranks, mkcclUniqueId commId, int rank,
                                      mkcclConfig_t* config);

/* Creates ndev communicators in this process, rank i on devlist[i] (or device i if devlist is
 * NULL). comms must have room for ndev handles. */
mkcclResult_t mkcclCommInitAll(mkcclComm_t* comms, int ndev, const int* devlist);

/* Waits for this rank's outstanding work on the communicator, then frees it. A communicator that
 * has an async error is freed without waiting for the device (as mkcclCommAbort). */
mkcclResult_t mkcclCommDestroy(mkcclComm_t comm);

/* Makes every device wait of this communicator give up at once, then frees it. Use it after an
 * error; outstanding kernels exit with an error instead of finishing their work. */
mkcclResult_t mkcclCommAbort(mkcclComm_t comm);

/* *asyncError = the first error recorded by this communicator's kernels or threads, mkcclSuccess,
 * or mkcclInProgress while a non-blocking init has not finished. */
mkcclResult_t mkcclCommGetAsyncError(mkcclComm_t comm, mkcclResult_t* asyncError);

mkcclResult_t mkcclCommCount(const mkcclComm_t comm, int* count);
mkcclResult_t mkcclCommUserRank(const mkcclComm_t comm, int* rank);
mkcclResult_t mkcclCommCuDevice(const mkcclComm_t comm, int* device);

/* ---------------------------------------------------------------------------------------------- */
/* Collectives (counts are elements)                                                               */
/* ---------------------------------------------------------------------------------------------- */

/* recvbuff[r*sendcount ...] = sendbuff of rank r. In place when sendbuff == recvbuff + rank*sendcount. */
mkcclResult_t mkcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             mkcclDataType_t datatype, mkcclComm_t comm, cudaStream_t stream);

/* recvbuff = the rank's recvcount-element block of the reduction of every rank's sendbuff
 * (nranks*recvcount elements). In place when recvbuff == sendbuff + rank*recvcount. */
mkcclResult_t mkcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 mkcclDataType_t datatype, mkcclRedOp_t op, mkcclComm_t comm,
                                 cudaStream_t stream);

/* recvbuff = reduction of every rank's sendbuff. In place when sendbuff == recvbuff. */
mkcclResult_t mkcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             mkcclDataType_t datatype, mkcclRedOp_t op, mkcclComm_t comm,
                             cudaStream_t stream);

/* Block p of sendbuff (count elements each) goes to rank p, which stores it as its block r.
 * Not in place (sendbuff and recvbuff must not overlap). */
mkcclResult_t mkcclAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                            mkcclDataType_t datatype, mkcclComm_t comm, cudaStream_t stream);

/* Variable-size all-to-all: sendcounts[p] elements from sendbuff + sdispls[p] go to rank p, which
 * stores them at its recvbuff + rdispls[r] (recvcounts[r] elements). Arrays have nranks entries
 * and live in host memory; they must agree across ranks. */
mkcclResult_t mkcclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                             void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                             mkcclDataType_t datatype, mkcclComm_t comm, cudaStream_t stream);

/* ---------------------------------------------------------------------------------------------- */
/* GEMM engine and fused ops (bf16/fp16 inputs, fp32 accumulation)                                */
/* ---------------------------------------------------------------------------------------------- */

/* C[M, N] = A[M, K] · W[N, K]ᵀ on one GPU (the tile engine every fused op uses). A and W of
 * inType (bf16 or fp16), C of outType (bf16, fp16 or fp32). Row pitches are K and N elements and
 * must be multiples of 16 bytes (TMA's rule). */
mkcclResult_t mkcclGemm(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                        mkcclDataType_t inType, mkcclDataType_t outType, cudaStream_t stream);

/* Grouped GEMM (MoE's expert GEMMs): for every group g < groups, the rows of group g of C are
 * (the rows of group g of A) · W_gᵀ. A[maxRows, K] and C[maxRows, N] hold the groups' rows stacked:
 * group g owns rows [rowOffsets[g], rowOffsets[g + 1]); W[groups * N, K] holds W_g in rows
 * [g * N, (g + 1) * N). rowOffsets is a DEVICE array of groups + 1 non-decreasing multiples of 128
 * (pad each group to whole 128-row tiles; padding rows of C receive their rows' products), read by
 * the kernel only: a device-side routing may write it just before, with no host synchronisation
 * (the call can be captured in a CUDA graph). Offsets past maxRows are clamped. Offsets that are not
 * non-decreasing multiples of 128 stop the kernel at that group; the next GEMM call returns
 * mkcclInvalidArgument saying so. Types as for mkcclGemm. */
mkcclResult_t mkcclGroupedGemm(const void* A, const void* W, void* C, const int* rowOffsets, int groups,
                               size_t maxRows, size_t N, size_t K, mkcclDataType_t inType,
                               mkcclDataType_t outType, cudaStream_t stream);

/* Grouped GEMM with a SwiGLU epilogue (MoE's first expert GEMM, gate and up in one):
 * C_g[rows, I] = silu(A_g · Gate_gᵀ) * (A_g · Up_gᵀ), computed in fp32, stored once as outType.
 * Rows, rowOffsets and A as for mkcclGroupedGemm. W1[groups * 2*Ip, K] with Ip = I rounded up to
 * 128: group g's part holds, for each 128-column block b, the 128 gate rows of block b then the
 * 128 up rows of block b ("blocked interleave", docs/MOE.md; rows past I in the last block are
 * never used). I and K multiples of 8 (16-byte row pitches). C[maxRows, I]. */
mkcclResult_t mkcclGroupedGemmSwiglu(const void* A, const void* W1, void* C, const int* rowOffsets, int groups,
                                     size_t maxRows, size_t I, size_t K, mkcclDataType_t inType,
                                     mkcclDataType_t outType, cudaStream_t stream);

/* How W1 holds gate and up (mkcclGroupedGemmSwigluEx, mkcclMoeDispatchGemm):
 *   mkcclSwigluBlocked  the blocked interleave above, [groups * 2*Ip, K];
 *   mkcclSwigluGateUp   gate rows then up rows, W1_g = [2*I, K] (rows [0, I) gate, [I, 2I) up): the
 *                       fused gate/up projection as engines store it, used as is. */
typedef enum { mkcclSwigluBlocked = 0, mkcclSwigluGateUp = 1 } mkcclSwigluLayout_t;

/* mkcclGroupedGemmSwiglu with W1 in either layout (mkcclGroupedGemmSwiglu = mkcclSwigluBlocked).
 * W1 is [groups * 2*Ip, K] (blocked) or [groups * 2*I, K] (gate-up); the rest as above. */
mkcclResult_t mkcclGroupedGemmSwigluEx(const void* A, const void* W1, mkcclSwigluLayout_t w1Layout, void* C,
                                       const int* rowOffsets, int groups, size_t maxRows, size_t I, size_t K,
                                       mkcclDataType_t inType, mkcclDataType_t outType, cudaStream_t stream);

/* AllGather + GEMM (column parallel): each rank holds A_r[M/nranks, K] and W_r[N, K];
 * C[M, N] = AllGather(A) · W_rᵀ. If gatheredA is not NULL it receives AllGather(A) [M, K].
 * M must be divisible by nranks. The short form of mkcclAllGatherGemmEx (below): contiguous
 * matrices, no bias, C of the input type, one weight. */
mkcclResult_t mkcclAllGatherGemm(const void* A, const void* W, void* C, void* gatheredA, size_t M,
                                 size_t N, size_t K, mkcclDataType_t datatype, mkcclComm_t comm,
                                 cudaStream_t stream);

/* GEMM + ReduceScatter (row parallel): each rank holds A_r[M, K] and W_r[N, K] (K is this rank's
 * share of the inner dimension); C[M/nranks, N] = rows rank*M/nranks... of Σ_q A_q · W_qᵀ.
 * M must be divisible by nranks. */
mkcclResult_t mkcclGemmReduceScatter(const void* A, const void* W, void* C, size_t M, size_t N,
                                     size_t K, mkcclDataType_t datatype, mkcclComm_t comm,
                                     cudaStream_t stream);

/* GEMM + AllReduce: as above, C[M, N] = Σ_q A_q · W_qᵀ on every rank. These two are the short
 * forms of mkcclGemmReduceScatterEx / mkcclGemmAllReduceEx (below). */
mkcclResult_t mkcclGemmAllReduce(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                 mkcclDataType_t datatype, mkcclComm_t comm, cudaStream_t stream);

/* The fused ops' full arguments (the calls above are the short form of these): row pitches, a bias,
 * an output type of its own and, for AllGather+GEMM, several weights sharing one gathered A (QKV,
 * gate/up) in one call. Initialize with MKCCL_FUSED_GEMM_ARGS_INITIALIZER, then set fields; the
 * struct is versioned (size, magic, version first) so that it can grow.
 *
 *   mkcclAllGatherGemmEx     A[M/nranks, K] (this rank's rows); for every weight i:
 *                            C_i[M, N_i] = AllGather(A) . W_iᵀ (+ bias_i). A is gathered once.
 *   mkcclGemmReduceScatterEx A[M, K]; C[M/nranks, N] = rows rank*M/nranks... of Σ_q A_q . W_qᵀ (+ bias)
 *   mkcclGemmAllReduceEx     A[M, K]; C[M, N] = Σ_q A_q . W_qᵀ (+ bias) on every rank
 *
 * Pitches are in elements; 0 means contiguous (lda = K, ldw = K, ldc = N). A pitch must be at least
 * the row's width and a multiple of 16 bytes, and every matrix 16-byte aligned (TMA's rules). The
 * bias is added in fp32 to the fp32 accumulators before the conversion to outType; for
 * GEMM+ReduceScatter/AllReduce it is added once, to the reduced sum (pass the same bias on every
 * rank). K must be a multiple of 8 (16-byte rows of the gathered or reduced operands); for
 * GEMM+ReduceScatter/AllReduce N too; a row of C (N elements of outType) must be a multiple of 16
 * bytes, whatever ldc (TMA stores whole 16-byte pieces). gatheredA (AllGather+GEMM only, optional) is [M, K],
 * contiguous. docs/AG_GEMM.md and docs/GEMM_RS_AR.md say which plan runs each argument. */
#define MKCCL_FUSED_GEMM_ARGS_MAGIC 0x6d6b6667u /* 'mkfg' */
#define MKCCL_FUSED_GEMM_ARGS_VERSION 1
#define MKCCL_FUSED_MAX_WEIGHTS 8
typedef struct {
  const void* W;    /* [N, K], rows of ldw elements, of inType */
  void* C;          /* [rows, N], rows of ldc elements, of outType */
  const void* bias; /* [N] of biasType, or NULL */
  size_t N;         /* output columns of this weight */
  size_t ldw;       /* 0: K */
  size_t ldc;       /* 0: N */
} mkcclFusedWeight_t;

typedef struct mkcclFusedGemmArgs_v1 {
  size_t size;               /* sizeof(mkcclFusedGemmArgs_t) */
  unsigned int magic;        /* MKCCL_FUSED_GEMM_ARGS_MAGIC */
  unsigned int version;      /* MKCCL_FUSED_GEMM_ARGS_VERSION */
  const void* A;             /* this rank's A, rows of lda elements, of inType */
  size_t M;                  /* rows: the gathered A's (AllGather+GEMM) or A's (GEMM+RS/AR) */
  size_t K;                  /* inner dimension (GEMM+RS/AR: this rank's share) */
  size_t lda;                /* 0: K */
  mkcclDataType_t inType;    /* A and W: mkcclBfloat16 or mkcclFloat16 */
  mkcclDataType_t outType;   /* C: mkcclBfloat16, mkcclFloat16 or mkcclFloat32; mkcclNumTypes: inType */
  mkcclDataType_t biasType;  /* bias: mkcclBfloat16, mkcclFloat16 or mkcclFloat32; mkcclNumTypes: inType */
  void* gatheredA;           /* AllGather+GEMM: receives AllGather(A) [M, K] if not NULL; else NULL */
  int numWeights;            /* 1..MKCCL_FUSED_MAX_WEIGHTS (AllGather+GEMM); 1 for GEMM+RS/AR */
  mkcclFusedWeight_t weights[MKCCL_FUSED_MAX_WEIGHTS];
} mkcclFusedGemmArgs_t;

#define MKCCL_FUSED_GEMM_ARGS_INITIALIZER                                                            \
  {                                                                                                 \
    sizeof(mkcclFusedGemmArgs_t), MKCCL_FUSED_GEMM_ARGS_MAGIC, MKCCL_FUSED_GEMM_ARGS_VERSION, NULL, 0, \
        0, 0, mkcclBfloat16, mkcclNumTypes, mkcclNumTypes, NULL, 1,                                   \
    {                                                                                               \
      { NULL, NULL, NULL, 0, 0, 0 }                                                                 \
    }                                                                                               \
  }

/* Every argument is checked before anything is enqueued (mkcclInvalidArgument naming the field);
 * like every call, these allocate nothing and do not synchronise with the host once the
 * communicator's scratch has grown to the shape (one eager call before a CUDA-graph capture).
 * AllGather+GEMM runs weight 0 with the gather and weights 1.. as GEMMs on the gathered A in the
 * same call; GEMM+RS/AR with a bias, another output type or a pitch of C reduce in fp32 (not fused). */
mkcclResult_t mkcclAllGatherGemmEx(const mkcclFusedGemmArgs_t* args, mkcclComm_t comm, cudaStream_t stream);
mkcclResult_t mkcclGemmReduceScatterEx(const mkcclFusedGemmArgs_t* args, mkcclComm_t comm, cudaStream_t stream);
mkcclResult_t mkcclGemmAllReduceEx(const mkcclFusedGemmArgs_t* args, mkcclComm_t comm, cudaStream_t stream);

/* ---------------------------------------------------------------------------------------------- */
/* MoE: expert-parallel dispatch and combine (NVLink in a node, the network across nodes)         */
/* ---------------------------------------------------------------------------------------------- */

/* E experts are spread evenly over the communicator's ranks: rank r owns the global experts
 * [r*E/nranks, (r+1)*E/nranks) (its local experts 0 .. E/nranks-1). Routing (topk_idx) is read on
 * the device only: no count goes back to the host, nothing is allocated or synchronised by a call,
 * and every buffer lives in the handle, sized once by its capacity. docs/MOE.md has the design. */

#define MKCCL_MOE_CONFIG_MAGIC 0x6d6b6d65u /* 'mkme' */
#define MKCCL_MOE_CONFIG_VERSION 1
typedef struct mkcclMoeConfig_v1 {
  size_t size;            /* sizeof(mkcclMoeConfig_t) */
  unsigned int magic;     /* MKCCL_MOE_CONFIG_MAGIC */
  unsigned int version;   /* MKCCL_MOE_CONFIG_VERSION */
  int numExperts;         /* E (global), a multiple of nranks, at most 1024 */
  int topk;               /* k, 1..16: slots per token */
  size_t hidden;          /* H: elements of a token row */
  mkcclDataType_t dtype;  /* mkcclBfloat16 or mkcclFloat16 */
  size_t maxTokensPerRank;/* capacity: the most tokens (T) any rank passes to one dispatch */
  size_t maxRecvRows;     /* rows of this rank's expert-major receive buffer, padding included;
                             0: the worst case, nranks*maxTokensPerRank*k rows plus
                             each local expert's padding. A dispatch that would need more rows on
                             any rank fails on every rank with a recorded error (no write). */
  int rowAlign;           /* every expert's segment starts at a multiple of this many rows (a power
                             of two, 1..1024); 0: 128, a GEMM's tile height */
  int maxCtas;            /* CTAs of one dispatch/combine kernel; 0: every SM the communicator's
                             maxCtas allows. Where ranks share a GPU, their kernels must fit on it
                             together. */
} mkcclMoeConfig_t;

#define MKCCL_MOE_CONFIG_INITIALIZER                                                              \
  { sizeof(mkcclMoeConfig_t), MKCCL_MOE_CONFIG_MAGIC, MKCCL_MOE_CONFIG_VERSION, 0, 0, 0, mkcclBfloat16, 0, 0, 0, 0 }

typedef struct mkcclMoe* mkcclMoe_t;

/* What one row of the expert-major receive buffer holds. Padding rows: token = srcRank = slot =
 * expert = -1 and weight = 0. */
typedef struct {
  int32_t token;   /* index of the token on its source rank */
  int16_t srcRank; /* the rank that dispatched it */
  int16_t slot;    /* j: topk_idx[token, j] named this row's expert */
  float weight;    /* topk_w[token, j] */
  int32_t expert;  /* local expert (0 .. E/nranks-1) whose segment holds the row */
} mkcclMoeRowInfo;

/* The handle's device buffers (fixed for its lifetime; written by every dispatch). */
typedef struct {
  void* recvX;               /* [maxRecvRows, rowPitch] of dtype: the rows routed to this rank's
                                experts, expert-major (every row of local expert 0, then 1, ...) */
  size_t rowPitch;           /* elements from one row of recvX to the next: H rounded up to a
                                multiple of 8 (16 bytes) */
  size_t maxRecvRows;
  mkcclMoeRowInfo* rowInfo;  /* [maxRecvRows]: where each row came from */
  int32_t* expertOffsets;    /* [E/nranks + 1]: first row of local expert e's segment (a multiple of
                                rowAlign); [E/nranks] = rows in use, padding included */
  int32_t* expertCounts;     /* [E/nranks]: routed rows of local expert e (its segment's first rows;
                                the rest of the segment, up to the next offset, is padding) */
  int numLocalExperts;       /* E/nranks */
  int rowAlign;
} mkcclMoeBuffers;

/* Creates the MoE handle of a communicator (collective: every rank calls it with the same config).
 * Allocates every buffer (symmetric memory mapped by the node's ranks, and local memory). */
mkcclResult_t mkcclMoeCreate(mkcclMoe_t* handle, mkcclComm_t comm, const mkcclMoeConfig_t* config);
/* Waits for this rank's calls on the handle to finish, then frees it (not collective). */
mkcclResult_t mkcclMoeDestroy(mkcclMoe_t handle);
mkcclResult_t mkcclMoeGetBuffers(mkcclMoe_t handle, mkcclMoeBuffers* buffers);

/* Dispatch: each of this rank's T tokens (X[T, H], dtype, rows contiguous) goes to the ranks that
 * own its experts (topk_idx[T, k], int32 global expert ids, -1 = no expert; topk_w[T, k], fp32),
 * once per (token, rank) however many of its experts live there. On return (stream order) the
 * handle's buffers hold this rank's expert-major rows, their rowInfo, expertOffsets and
 * expertCounts. 0 <= T <= maxTokensPerRank; T may differ between ranks. An expert id outside
 * [-1, E) is an error (recorded; the slot is dropped). Collective. */
mkcclResult_t mkcclMoeDispatch(mkcclMoe_t handle, const void* X, const int32_t* topkIdx, const float* topkW, size_t T,
                               cudaStream_t stream);

/* Combine: Y holds one output row per row of the last dispatch's receive buffer (expert-major,
 * rowPitch elements apart, dtype; Y may be recvX itself). Each row goes back to its source rank
 * and token, and out[t, :] = sum_j topk_w[t, j] * Y(t, j) (the weights given to the dispatch),
 * summed in fp32 and stored in dtype; a token with no expert gets zeros. T must be this rank's T of
 * the last dispatch; out is [T, H], rows contiguous. Collective. */
mkcclResult_t mkcclMoeCombine(mkcclMoe_t handle, const void* Y, void* out, size_t T, cudaStream_t stream);

/* Dispatch fused with the first expert GEMM: what mkcclMoeDispatch does, and on this rank's
 * received rows (with the tuner's moe.fused_route=overlap at the same time, each 128-row tile
 * starting once its rows have arrived; by default, auto = sequential, after the dispatch),
 *   swiglu = MKCCL_MOE_GEMM_SWIGLU (1):  act[r, :N] = silu(recvX[r] . gate_e^T) * (recvX[r] . up_e^T)
 *                 (N = I), W1 [E/nranks, 2*roundup(N, 128), H]: gate and up blocked-interleaved by
 *                 128 rows, as mkcclGroupedGemmSwiglu takes it;
 *   swiglu = MKCCL_MOE_GEMM_SWIGLU_GATE_UP (2):  the same with W1 [E/nranks, 2*N, H], each expert's
 *                 gate rows then its up rows (mkcclSwigluGateUp);
 *   swiglu = MKCCL_MOE_GEMM_PLAIN (0):  act[r, :N] = recvX[r] . W1_e^T,  W1 [E/nranks, N, H];
 *   any other value is mkcclInvalidArgument;
 * for every row r of local expert e's segment (expertOffsets). act is [maxRecvRows, N] of dtype,
 * rows N apart; padding rows hold any values. fp32 accumulation, one rounding to dtype. After it
 * (stream order) the handle's buffers are those of a dispatch: mkcclGroupedGemm(act, W2, Y, ...)
 * then mkcclMoeCombine(handle, Y, ...) finish the layer. Needs H and N multiples of 8, rowAlign a
 * multiple of 128, a Hopper GPU, and a handle whose maxCtas allows 2+ CTAs (overlap: a few of them
 * push the rows, the rest compute, the two grids at once on the communicator's second stream and
 * this one, joined before the call returns). Capturable in a CUDA graph. Across nodes: the
 * sequential route (the dispatch over the network, then the GEMM); moe.fused_route=overlap and
 * capture are mkcclInvalidUsage there. Collective. */
#define MKCCL_MOE_GEMM_PLAIN 0
#define MKCCL_MOE_GEMM_SWIGLU 1
#define MKCCL_MOE_GEMM_SWIGLU_GATE_UP 2
mkcclResult_t mkcclMoeDispatchGemm(mkcclMoe_t handle, const void* X, const int32_t* topkIdx, const float* topkW,
                                   size_t T, const void* W1, void* act, size_t N, int swiglu, cudaStream_t stream);

/* The second half of the layer fused: Y = act · W2_eᵀ per local expert (the grouped GEMM on the
 * layout of the last dispatch on this handle, plain or fused), and combine of Y into out (as
 * mkcclMoeCombine): by default (moe.fused_route=auto = sequential) after the GEMM; with
 * moe.fused_route=overlap at the same time: a few of the handle's CTAs return each 128-row block of
 * Y to its tokens' ranks as soon as the GEMM has stored it, the rest compute. act [maxRecvRows, I]
 * (mkcclMoeDispatchGemm's output with N = I), W2 [E/nranks, H, I], Y [maxRecvRows, H] (any device
 * buffer, or the handle's recvX) is written, out [T, H] as for mkcclMoeCombine. Needs H and I
 * multiples of 8, rowAlign a multiple of 128, a Hopper GPU and maxCtas >= 2 (overlap: two grids on
 * the communicator's second stream and this one, joined before the call returns). Capturable in a
 * CUDA graph. Across nodes: the sequential route (the GEMM, then the combine over the network);
 * moe.fused_route=overlap and capture are mkcclInvalidUsage there. Collective. */
mkcclResult_t mkcclMoeGemmCombine(mkcclMoe_t handle, const void* act, const void* W2, void* Y, void* out, size_t I,
                                  size_t T, cudaStream_t stream);

/* Attention (forward; bf16/fp16 inputs, fp32 softmax and accumulation)                            */
/* ---------------------------------------------------------------------------------------------- */

/* Layouts (all tensors row-major, dense, the last dimension contiguous; no other strides):
 *   Q, O    [batch, seq, headsQ, headDim]     K, V  [batch, seq, headsKv, headDim]
 *   LSE     [batch, headsQ, seq] fp32: the natural log of each row's softmax denominator,
 *           log(sum_j exp(scale * q.k_j)); -inf (and O = 0) for a query that attends no key.
 * headDim 64 or 128; headsQ a multiple of headsKv (GQA: query head h reads key/value head
 * h / (headsQ / headsKv)); scale > 0 multiplies the scores (usually 1 / sqrt(headDim)). Q, K, V
 * and O share one type (mkcclBfloat16 or mkcclFloat16); pointers are 16-byte aligned device
 * memory; O overlaps no input. Any sequence length (tails are masked). Sizes below 2^31. */

/* O = softmax(Q K^T * scale) V on the current device. causal: query i attends keys
 * j <= i + seqKv - seqQ (the mask aligned to the bottom right: the last query sees every key).
 * lse may be NULL. */
mkcclResult_t mkcclAttention(const void* Q, const void* K, const void* V, void* O, float* lse, size_t batch,
                             size_t seqQ, size_t seqKv, int headsQ, int headsKv, int headDim, float scale,
                             int causal, mkcclDataType_t datatype, cudaStream_t stream);

/* How the ranks of a ring split the sequence of nranks * seqLocal tokens. */
typedef enum {
  mkcclAttnContiguous = 0, /* rank r holds tokens [r seqLocal, (r + 1) seqLocal) */
  mkcclAttnZigzag = 1      /* the sequence cut in 2 nranks chunks of seqLocal / 2: rank r holds chunk r
                              then chunk 2 nranks - 1 - r (causal load balance; seqLocal even) */
} mkcclAttnLayout_t;

/* Ring Attention (context parallelism): each rank holds Q, K, V of its seqLocal tokens, laid out
 * over the sequence as `layout` says, and receives O (and LSE, may be NULL) of its own queries
 * against the whole sequence, causal by global position or not. K and V travel around the ring of
 * ranks over NVLink inside one kernel (only the headsKv heads travel), each rank computing on the
 * chunk it already holds; partial results merge in fp32. All ranks of the communicator on one
 * node; every rank passes the same sizes. */
mkcclResult_t mkcclRingAttention(const void* Q, const void* K, const void* V, void* O, float* lse, size_t batch,
                                 size_t seqLocal, int headsQ, int headsKv, int headDim, float scale, int causal,
                                 mkcclAttnLayout_t layout, mkcclDataType_t datatype, mkcclComm_t comm,
                                 cudaStream_t stream);

/* ---------------------------------------------------------------------------------------------- */
/* fp8 (e4m3) GEMM                                                                                 */
/* ---------------------------------------------------------------------------------------------- */

/* How the fp8 operands are scaled: the real value of an element is its e4m3 value times its scale. */
typedef enum {
  mkcclFp8ScaleTensor = 0, /* one float for all of A, one for all of W */
  mkcclFp8ScaleBlock = 1   /* DeepSeek-V3 blocks: A per row and 128-wide K block, W per 128 x 128 block */
} mkcclFp8ScaleKind_t;

/* The scales of one fp8 GEMM, all in DEVICE memory (read by the kernel only, so the call can be
 * captured in a CUDA graph and a kernel earlier on the stream may write them). fp32, 4-byte aligned.
 *   mkcclFp8ScaleTensor: scaleA[1], scaleW[1].
 *   mkcclFp8ScaleBlock:  scaleA[M][ceil(K/128)] (row-major: row m, K block kb at m * ceil(K/128) + kb),
 *                        scaleW[ceil(N/128)][ceil(K/128)] (N block nb, K block kb).
 * size: sizeof(mkcclFp8Scales_t) (the struct may grow; the library reads the fields it knows). */
typedef struct {
  size_t size;
  mkcclFp8ScaleKind_t kind;
  const float* scaleA;
  const float* scaleW;
} mkcclFp8Scales_t;
#define MKCCL_FP8_SCALES_INIT(kind, a, w) { sizeof(mkcclFp8Scales_t), (kind), (a), (w) }

/* C[M, N] = (A[M, K] . sA) · (W[N, K] . sW)ᵀ on one GPU: A and W e4m3 (mkcclFloat8e4m3) row-major,
 * C of outType (bf16, fp16 or fp32), fp32 accumulation; with block scales every 128-wide K block is
 * accumulated on the tensor cores, then scaled and added in fp32. K must be a multiple of 16 (TMA:
 * 16-byte row pitches), N * sizeof(outType) a multiple of 16; pointers 16-byte aligned. */
mkcclResult_t mkcclGemmFp8(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                           const mkcclFp8Scales_t* scales, mkcclDataType_t outType, cudaStream_t stream);

/* AllGather + GEMM with e4m3 inputs (mkcclAllGatherGemm's fp8 form: the gathered bytes halve). Rank r
 * holds A_r[M/nranks, K] and W_r[N, K], both e4m3; C[M, N] (outType: bf16, fp16 or fp32) =
 * (AllGather(A) . sA) · (W_r . sW)ᵀ, fp32 accumulation. If gatheredA is not NULL it receives the
 * gathered e4m3 bytes [M, K] (A may be this rank's block of it). Scales:
 *   mkcclFp8ScaleTensor: sA must hold the SAME value on every rank (the activations of one tensor
 *                        quantised with one scale; not checked), sW is this rank's own.
 *   mkcclFp8ScaleBlock:  sA is this rank's shard's [M/nranks][ceil(K/128)], sW this rank's
 *                        [ceil(N/128)][ceil(K/128)]; the shards' scale rows are gathered with their
 *                        rows inside the call (into the communicator's own memory; not returned).
 * K a multiple of 16, N * sizeof(outType) a multiple of 16, M divisible by nranks. Across nodes it
 * runs on the split route (docs/INTERNODE.md 6.1): eager calls only (capture: mkcclInvalidUsage),
 * nodes of one size, a shard within a slot of the network window. */
mkcclResult_t mkcclAllGatherGemmFp8(const void* A, const void* W, void* C, void* gatheredA, size_t M, size_t N,
                                    size_t K, const mkcclFp8Scales_t* scales, mkcclDataType_t outType,
                                    mkcclComm_t comm, cudaStream_t stream);

/* GEMM + ReduceScatter / GEMM + AllReduce with e4m3 inputs (mkcclGemmReduceScatter /
 * mkcclGemmAllReduce's fp8 form). Rank r holds A_r[M, K] and W_r[N, K] (K: its slice of the
 * contraction), both e4m3 row-major, and its own scales sA_r, sW_r, per tensor or block
 * (mkcclFp8ScaleBlock: [M][ceil(K/128)] and [ceil(N/128)][ceil(K/128)] of its K; ranks may differ:
 * each rank's partial product is scaled before the reduction). With P = Σ_r (A_r . sA_r) · (W_r . sW_r)ᵀ
 * (fp32 accumulation; each partial rounded to outType before it travels, as in the 16-bit calls):
 *   mkcclGemmReduceScatterFp8  C[M/nranks, N] = rows rank*M/nranks... of P
 *   mkcclGemmAllReduceFp8      C[M, N] = P on every rank
 * outType: mkcclBfloat16 or mkcclFloat16 (the partials travel in it). K a multiple of 16, N a
 * multiple of 8, M divisible by nranks (ReduceScatter). Across nodes they run on the split route
 * (docs/INTERNODE.md 7.2) or, where it does not apply, the GEMM then the hierarchical collective;
 * eager calls only (capture: mkcclInvalidUsage). */
mkcclResult_t mkcclGemmReduceScatterFp8(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                        const mkcclFp8Scales_t* scales, mkcclDataType_t outType, mkcclComm_t comm,
                                        cudaStream_t stream);
mkcclResult_t mkcclGemmAllReduceFp8(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                    const mkcclFp8Scales_t* scales, mkcclDataType_t outType, mkcclComm_t comm,
                                    cudaStream_t stream);

/* ---------------------------------------------------------------------------------------------- */
/* CUDA graphs and registered buffers (docs/GRAPHS.md)                                              */
/* ---------------------------------------------------------------------------------------------- */

/* Every call may be captured into a CUDA graph and the graph replayed any number of times, mixed
 * with eager calls on the same communicator (MoE dispatch/combine and calls across nodes: see
 * docs/GRAPHS.md). Make one eager call of each op at its largest shape before capturing: a
 * captured call that would have to grow the communicator's symmetric scratch returns
 * mkcclInvalidUsage (the capture stays usable). */

/* Device memory of the current device that every local peer of a communicator can map
 * (CUDA VMM, shareable by file descriptor); size is rounded up to the allocation granularity.
 * Free it with mkcclMemFree once no communicator has it registered and no work on any stream still
 * uses it (mkcclMemFree does not synchronise). */
mkcclResult_t mkcclMemAlloc(void** ptr, size_t size);
mkcclResult_t mkcclMemFree(void* ptr);

/* Collective over the communicator's ranks (every rank calls it, with its own buffer of the same
 * size): registers [buff, buff + size), which must lie in memory from mkcclMemAlloc on the
 * communicator's device, and maps every local peer's buffer here. *handle names the registration
 * for mkcclCommDeregister. A collective whose buffers lie in registrations uses them in place,
 * with no copy through the workspace (docs/GRAPHS.md: AllGather's receive buffer, ReduceScatter's
 * and AllToAll(v)'s send buffer, AllReduce's receive buffer; one node; from 1 MiB per block between
 * two ranks, tuner keys coll.direct / coll.direct_bytes). The fused ops use a registered gatheredA
 * (mkcclAllGatherGemm: the peers' shards land in it directly) and a registered C (mkcclGemmAllReduce,
 * fused route: finished tiles are stored into every peer's C) in place at every size; coll.direct=off
 * turns that off too. A registered A, or mkcclGemmReduceScatter's C, changes nothing (no copy of
 * them exists). Each rank may use its own offset inside
 * the registration, but every rank must pass buffers of the same registration (or every rank
 * unregistered ones) with counts that agree: a call where they do not ends with an error on every
 * rank (mkcclInvalidUsage where the in-place path found the mismatch, mkcclTimeout on a rank that
 * staged; the fused ops check on every rank: mkcclInvalidUsage) instead of a hang or a silent wrong
 * result; its outputs are undefined. A range that overlaps a registration of the communicator is
 * refused (mkcclInvalidUsage). */
mkcclResult_t mkcclCommRegister(const mkcclComm_t comm, void* buff, size_t size, void** handle);
/* Collective: ends a registration; waits (bounded) for the communicator's outstanding eager work.
 * Refused (mkcclInvalidUsage) while a captured CUDA graph that uses it still exists. */
mkcclResult_t mkcclCommDeregister(const mkcclComm_t comm, void* handle);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MKCCL_H_ */
