// Prefill-shaped linear layers through cuBLASLt: y[tokens, rows] = x[tokens, in] · Wᵀ
// (+ bias through the BIAS epilogue, + residual through the C operand). Row-major y, x
// and W read as column-major is
//   D (rows x tokens, ld rows) = op_T(A: in x rows, ld in) · B (in x tokens, ld in)
// so W is used as stored in the checkpoint, with no transpose copy.
#include <cublasLt.h>

#include <algorithm>

#include "kvrt/engine/cuda/kernels.h"
#include "kvrt/engine/cuda/launch.h"

namespace kvrt::engine::cuda {
namespace {

Status lt_check(cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status();
  return internal_error("prefill_linear: ", what, ": ", cublasLtGetStatusName(status), " (",
                        cublasLtGetStatusString(status), ")");
}

// The largest power of two (<= 256) that divides every pointer: cuBLASLt picks kernels
// by the alignment it is promised.
int common_alignment(std::initializer_list<const void*> pointers) {
  int alignment = 256;
  for (const void* ptr : pointers) {
    if (ptr == nullptr) continue;
    while (alignment > 2 && !detail::is_aligned(ptr, static_cast<size_t>(alignment))) {
      alignment /= 2;
    }
  }
  return alignment;
}

}  // namespace

struct PrefillLinear::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  ~Plan() {
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

Result<std::unique_ptr<PrefillLinear>> PrefillLinear::create(size_t workspace_bytes) {
  std::unique_ptr<PrefillLinear> linear(new PrefillLinear());
  cublasLtHandle_t handle = nullptr;
  KVRT_RETURN_IF_ERROR(lt_check(cublasLtCreate(&handle), "cublasLtCreate"));
  linear->handle_ = handle;
  if (workspace_bytes > 0) {
    KVRT_RETURN_IF_ERROR(
        cuda_check(cudaMalloc(&linear->workspace_, workspace_bytes), "prefill_linear workspace"));
  }
  linear->workspace_bytes_ = workspace_bytes;
  return linear;
}

PrefillLinear::~PrefillLinear() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

Result<const PrefillLinear::Plan*> PrefillLinear::plan(const PlanKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  const auto [tokens, rows, in, residual, bias, alignment] = key;
  auto plan = std::make_unique<Plan>();
  KVRT_RETURN_IF_ERROR(
      lt_check(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc"));
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  KVRT_RETURN_IF_ERROR(
      lt_check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                              sizeof(transpose)),
               "transa"));
  KVRT_RETURN_IF_ERROR(lt_check(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)),
      "transb"));
  if (bias) {  // bf16, like D; its pointer is set per call (run)
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    KVRT_RETURN_IF_ERROR(
        lt_check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                sizeof(epilogue)),
                 "epilogue"));
  }
  KVRT_RETURN_IF_ERROR(
      lt_check(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16BF, in, rows, in), "layout A"));
  KVRT_RETURN_IF_ERROR(
      lt_check(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16BF, in, tokens, in), "layout B"));
  KVRT_RETURN_IF_ERROR(
      lt_check(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_16BF, rows, tokens, rows), "layout C"));

  cublasLtMatmulPreference_t preference = nullptr;
  KVRT_RETURN_IF_ERROR(lt_check(cublasLtMatmulPreferenceCreate(&preference), "preference"));
  const uint64_t workspace = workspace_bytes_;
  const uint32_t align = static_cast<uint32_t>(alignment);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace, sizeof(workspace));
  for (auto attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    cublasLtMatmulPreferenceSetAttribute(preference, attribute, &align, sizeof(align));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), plan->op, plan->a,
                                     plan->b, plan->c, plan->c, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  KVRT_RETURN_IF_ERROR(lt_check(status, "heuristic"));
  if (found == 0) {
    return not_supported("prefill_linear: cuBLASLt has no algorithm for tokens=", tokens,
                         " rows=", rows, " in=", in, residual ? " with residual" : "",
                         bias ? " with bias" : "");
  }
  plan->algo = result.algo;
  const Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

Status PrefillLinear::run(const bf16* weight, const bf16* input, int tokens, int rows, int in,
                          const bf16* residual, bf16* output, cudaStream_t stream,
                          const bf16* bias) {
  if (weight == nullptr || input == nullptr || output == nullptr) {
    return invalid_argument("prefill_linear: weight, input and output must be non-null");
  }
  if (tokens < 1 || rows < 1 || in < 1) {
    return invalid_argument("prefill_linear: tokens, rows and in must be positive, got ", tokens,
                            ", ", rows, ", ", in);
  }
  if (bias != nullptr && !detail::is_aligned(bias, 16)) {
    return invalid_argument("prefill_linear: bias must be 16-byte aligned (cuBLASLt's epilogue)");
  }
  const int alignment = common_alignment({weight, input, residual, output});
  KVRT_ASSIGN_OR_RETURN(const Plan* p,
                        plan({tokens, rows, in, residual != nullptr, bias != nullptr, alignment}));
  const float alpha = 1.0f, beta = residual != nullptr ? 1.0f : 0.0f;
  const void* c = residual != nullptr ? static_cast<const void*>(residual) : output;
  auto matmul = [&] {
    return lt_check(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p->op, &alpha, weight,
                                   p->a, input, p->b, &beta, c, p->c, output, p->c, &p->algo,
                                   workspace_, workspace_bytes_, stream),
                    "cublasLtMatmul");
  };
  if (bias == nullptr) return matmul();
  // The bias pointer lives in the plan's shared descriptor: set it and enqueue under the
  // lock, so that concurrent calls of one shape cannot swap biases.
  std::lock_guard<std::mutex> lock(mutex_);
  KVRT_RETURN_IF_ERROR(lt_check(
      cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
      "bias pointer"));
  return matmul();
}

}  // namespace kvrt::engine::cuda
