//! The look-alikes (issue 38, items 2 and 3): the HIP call that returned `hipErrorIllegalState`
//! decides whether it can be the refusal (only a dispatch can), and the common other failures are
//! named with their next step (exit 0) while a log with no recognisable failure stays inconclusive
//! (exit 2). Each row is our own log text, shaped like the public reports' lines.

use super::doctor::*;

/// Run doctor on `--log` holding `text`, with an empty machine.
fn log_text(text: &str) -> Out {
    let t = Tree::new();
    let p = t.path().join("user.log");
    std::fs::write(&p, text).unwrap();
    doctor(&t, None, &["--log", p.to_str().unwrap()])
}

/// (what, log text, exit code, log class, the signature of a finding it must have).
const ROWS: &[(&str, &str, i32, &str, &str)] = &[
    (
        "torch out of memory",
        "Traceback (most recent call last):\n  File \"bench.py\", line 40, in <module>\n    y = model(x)\ntorch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.98 GiB of which 1.02 GiB is free.\n",
        0,
        "different-problem",
        "hip-out-of-memory",
    ),
    (
        "hipErrorOutOfMemory at hipMalloc",
        ":3:hip_memory.cpp           :681 : 88123 us: [pid:4242 tid:0x7f11] hipMalloc ( 0x7ffd1234, 85899345920 ) \n:3:hip_memory.cpp           :683 : 88130 us: [pid:4242 tid:0x7f11] hipMalloc: Returned hipErrorOutOfMemory : \n",
        0,
        "different-problem",
        "hip-out-of-memory",
    ),
    (
        "a host-side assertion in ROCr",
        "INFO 12-04 12:00:00 model_runner.py:1011] Loading model weights took 13.5 GB\npython3: /src/rocr-runtime/runtime/hsa-runtime/core/runtime/amd_aql_queue.cpp:1081: void rocr::AMD::AqlQueue::ExecutePM4(uint32_t*, size_t): Assertion `false && \"PM4 command timed out\"' failed.\nAborted (core dumped)\n",
        0,
        "different-problem",
        "host-assertion",
    ),
    (
        "P2P not supported between the GPUs",
        "rank 1: RuntimeError: HIP error: peer access is not supported between these two devices\nHIP kernel errors might be asynchronously reported at some other API call\n",
        0,
        "different-problem",
        "p2p-unsupported",
    ),
    (
        "a host hang (hung task)",
        "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n[ 1234.567890] INFO: task python3:4242 blocked for more than 122 seconds.\n[ 1234.567900]       Not tainted 6.8.0-49-generic #49-Ubuntu\n",
        0,
        "different-problem",
        "host-hung-task",
    ),
    (
        "invalid device function (wrong gfx target)",
        "RuntimeError: HIP error: invalid device function\nHIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n",
        0,
        "different-problem",
        "hip-invalid-device-function",
    ),
    (
        "hipErrorInvalidDeviceFunction at launch",
        ":3:hip_module.cpp :605 : 1 us: hipModuleLaunchKernel: Returned hipErrorInvalidDeviceFunction :\n",
        0,
        "different-problem",
        "hip-invalid-device-function",
    ),
    (
        "a GPU memory access fault",
        "Memory access fault by GPU node-2 (Agent handle: 0x55d0c0a0b0c0) on address 0x7f1e2c000000. Reason: Page not present or supervisor privilege.\nAborted (core dumped)\n",
        0,
        "different-problem",
        "gpu-memory-access-fault",
    ),
    (
        "a VF mailbox loop pasted from dmesg",
        "$ dmesg | tail\n[   15.000000] amdgpu 0000:3c:00.0: amdgpu: trn=2 ACK should not assert! wait again !\n[   15.200000] amdgpu 0000:3c:00.0: amdgpu: Doesn't get ack from pf, give up\n",
        0,
        "different-problem",
        "vf-mailbox",
    ),
    (
        "librocm_smi64 missing",
        "  File \"/venv/lib/python3.12/site-packages/amdsmi/amdsmi_wrapper.py\", line 12\nImportError: librocm_smi64.so.7: cannot open shared object file: No such file or directory\n",
        0,
        "different-problem",
        "wheel-missing-rocm-smi",
    ),
    (
        "hipErrorIllegalState from stream capture, plain kernels running",
        ":3:rocvirtual.cpp           :3000: 10 us: ShaderName : void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, at::native::FillFunctor<float>)\n:3:hip_module.cpp           :700 : 12 us: hipLaunchKernel: Returned hipSuccess : \n:3:hip_graph.cpp            :1360: 90 us: hipStreamBeginCapture: Returned hipErrorIllegalState : \nRuntimeError: HIP error: the operation cannot be performed in the present state\n",
        0,
        "different-problem",
        "hip-illegal-state-capture",
    ),
    (
        "a call not allowed while capturing",
        "RuntimeError: HIP error: operation not permitted when stream is capturing\nCompile with `TORCH_USE_HIP_DSA` to enable device-side assertions.\n",
        0,
        "different-problem",
        "hip-stream-capture",
    ),
    (
        "hipErrorIllegalState from a graph launch",
        ":3:hip_graph.cpp            :1500: 90 us: hipGraphLaunch: Returned hipErrorIllegalState : \n",
        0,
        "different-problem",
        "hip-illegal-state-graph",
    ),
    (
        "hipErrorIllegalState from a memory call",
        ":3:hip_memory.cpp           :900 : 90 us: hipMemcpyAsync: Returned hipErrorIllegalState : \n",
        0,
        "different-problem",
        "hip-illegal-state-memory",
    ),
    (
        "hipErrorIllegalState from an event call",
        ":3:hip_event.cpp            :300 : 90 us: hipEventRecord: Returned hipErrorIllegalState : \n",
        0,
        "different-problem",
        "hip-illegal-state-event",
    ),
    (
        "hipErrorIllegalState from hipExtLaunchKernel in RCCL: still the refusal's face",
        ":3:hip_module.cpp           :605 : 1 us: hipExtLaunchKernel: Returned hipErrorIllegalState : \nenqueue.cc:2061 NCCL WARN HIP failure 'the operation cannot be performed in the present state'\n",
        1,
        "consistent-with-refusal",
        "hip-illegal-state",
    ),
    (
        "out of memory next to the runtime's refusal line: the refusal decides",
        ":3:rocvirtual.cpp :4151: 1 us: ShaderName : ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)\n:1:rocvirtual.cpp :4208: 2 us: Pcie atomics not enabled, hostcall not supported\ntorch.OutOfMemoryError: HIP out of memory. Tried to allocate 20.00 MiB.\n",
        1,
        "confirmed-refusal",
        "clr-hostcall-refused",
    ),
    (
        "out of memory next to RCCL's launch returning hipErrorIllegalState: neither is clear",
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 20.00 MiB.\nenqueue.cc:2061 NCCL WARN HIP failure 'the operation cannot be performed in the present state'\n",
        2,
        "inconclusive",
        "hip-out-of-memory",
    ),
    (
        "advice that mentions out of memory is not an out-of-memory error",
        "WARNING 12-04 12:00:00 worker.py:200] lower --gpu-memory-utilization to avoid out of memory errors\n",
        2,
        "no-signature",
        "",
    ),
    (
        "no recognisable failure",
        "INFO 12-04 12:00:00 api_server.py:100] vLLM API server version 0.9.1\nINFO 12-04 12:00:05 model_runner.py:1011] Loading model weights took 13.5 GB\n",
        2,
        "no-signature",
        "",
    ),
];

/// Issue 38: every look-alike is named with its next step and is not the refusal (exit 0); only a
/// dispatch's `hipErrorIllegalState` keeps the refusal's face; a log with no recognisable failure
/// stays inconclusive.
#[test]
fn lookalikes_are_named_and_only_a_dispatch_can_be_the_refusal() {
    for (what, text, code, class, sig) in ROWS {
        let o = log_text(text);
        let ctx = format!("{what}:\n{}", o.text);
        assert_eq!(o.code, *code, "{ctx}");
        assert_eq!(o.json["logs"][0]["class"], *class, "{ctx}");
        if !sig.is_empty() {
            let sigs: Vec<&str> = o.json["logs"][0]["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["signature"].as_str().unwrap())
                .collect();
            assert!(sigs.contains(sig), "{sigs:?} {ctx}");
        }
        if *code == 0 {
            let h = o.json["headline"].as_str().unwrap();
            assert!(
                h.starts_with("not affected by the hostcall refusal"),
                "{ctx}"
            );
            assert!(!o.actions().is_empty(), "no next step: {ctx}");
            assert!(o.text.contains("next: "), "{ctx}");
        }
        if class.contains("different") {
            assert!(
                o.json["logs"][0]["refusals"].as_array().unwrap().is_empty(),
                "{ctx}"
            );
        }
    }
}
