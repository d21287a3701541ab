"""CUDA-only tests (skip without a GPU): graph capture, streams, checkpoints across devices, the
CUDA step against the host backend's."""

import copy

import pytest
import torch

import qopt
from test_step import bits, grads_for, params_on, set_grads
from conftest import backend_available


def copy_grads(params, grads):
    for p, g in zip(params, grads):
        p.grad.copy_(g)


def _groups(params, two):
    """One group, or two (the usual decay / no-decay split: two launches in one captured step)."""
    if not two:
        return params
    return [{"params": params[::2]}, {"params": params[1::2], "weight_decay": 0.0}]


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("cls,kw", [(qopt.FlashAdamW, {}), (qopt.AdamW8bit, {}),
                                    (qopt.FlashSGD, dict(momentum=0.9)), (qopt.FlashLion, {})],
                         ids=["adamw", "adamw8bit", "sgd", "lion"])
def test_cuda_graph_capture_replays_equal_eager(cuda, cls, kw, groups):
    """3 warm-up steps, capture one step, 2 replays (the second with a new learning rate): the
    parameters and every state byte equal an eager run of the same 5 steps."""
    shapes = [(1000,), (4097,), (3, 7), (64, 65)]
    graphed = params_on(cuda, *shapes, seed=1)
    eager = [torch.nn.Parameter(p.detach().clone()) for p in graphed]
    eager_default = [torch.nn.Parameter(p.detach().clone()) for p in graphed]
    lr_g = torch.tensor(1e-2, device=cuda)
    lr_e = torch.tensor(1e-2, device=cuda)
    two = groups == 2
    opt = cls(_groups(graphed, two), lr=lr_g, capturable=True, **kw)
    ref = cls(_groups(eager, two), lr=lr_e, capturable=True, **kw)
    # float lr (the float32 value of the tensor lr), uniforms evaluated by the runtime on the host
    ref_default = cls(_groups(eager_default, two), lr=float(torch.tensor(1e-2, dtype=torch.float32)), **kw)
    all_grads = [grads_for(graphed, seed=10 + i) for i in range(5)]

    for p in graphed:
        p.grad = torch.zeros_like(p)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            copy_grads(graphed, all_grads[i])
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opt.step()
    for i in (3, 4):
        copy_grads(graphed, all_grads[i])
        if i == 4:
            lr_g.fill_(5e-3)
        graph.replay()

    for i in range(5):
        set_grads(eager, all_grads[i])
        set_grads(eager_default, all_grads[i])
        if i == 4:
            lr_e.fill_(5e-3)
            for g in ref_default.param_groups:
                g["lr"] = float(torch.tensor(5e-3, dtype=torch.float32))
        ref.step()
        ref_default.step()
    torch.cuda.synchronize()
    for p, q, r in zip(graphed, eager, eager_default):
        assert torch.equal(bits(p), bits(q))
        assert torch.equal(bits(p), bits(r))
        for k in opt.state[p]:
            assert torch.equal(bits(opt.state[p][k]), bits(ref.state[q][k])), k
    assert float(opt.state[graphed[0]]["step"]) == 5


def test_capture_after_a_burst_of_queued_steps(cuda):
    """Forty steps queued behind a long kernel (every staging buffer of the runtime still in flight),
    then a capture: the runtime keeps one buffer idle for it, waiting for the oldest step when it
    must, so the capture succeeds and its replay equals an eager step."""
    params = params_on(cuda, (4096,), (333,), seed=11)
    twin = [torch.nn.Parameter(p.detach().clone()) for p in params]
    opt = qopt.FlashAdamW(params, lr=torch.tensor(1e-3, device=cuda), capturable=True)
    ref = qopt.FlashAdamW(twin, lr=torch.tensor(1e-3, device=cuda), capturable=True)
    grads = grads_for(params, seed=12)
    for p, g in zip(params, grads):
        p.grad = g.clone()
    set_grads(twin, grads)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time ahead of the steps
        for _ in range(40):
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    for _ in range(40):
        ref.step()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opt.step()
    graph.replay()
    ref.step()
    torch.cuda.synchronize()
    for p, q in zip(params, twin):
        assert torch.equal(bits(p), bits(q))


def test_optimizer_collected_during_capture_leaves_the_capture_intact(cuda):
    """An optimizer that the garbage collector finalizes in the middle of another one's captured
    step (the finalizer frees staging memory and waits for copies, which a capture forbids) has
    its kernel handles set aside and destroyed at the next step outside the capture; the capture
    and its replay are unaffected."""
    import gc

    from qopt import optim as qoptim

    doomed_params = params_on(cuda, (4096,), seed=7)
    doomed = qopt.FlashAdamW(doomed_params, capturable=True)
    set_grads(doomed_params, grads_for(doomed_params, seed=8))
    doomed.step()  # creates its kernel handles
    params = params_on(cuda, (4096,), seed=9)
    twin = [torch.nn.Parameter(p.detach().clone()) for p in params]
    opt = qopt.FlashAdamW(params, lr=torch.tensor(1e-2, device=cuda), capturable=True)
    ref = qopt.FlashAdamW(twin, lr=torch.tensor(1e-2, device=cuda), capturable=True)
    grads = grads_for(params, seed=10)
    for p, g in zip(params, grads):
        p.grad = g.clone()
    set_grads(twin, grads)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        opt.step()  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    ref.step()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        del doomed
        gc.collect()
        opt.step()
    assert qoptim._deferred_handles, "the finalizer ran during the capture and set its handles aside"
    graph.replay()
    ref.step()
    torch.cuda.synchronize()
    assert torch.equal(bits(params[0]), bits(twin[0]))
    opt.step()  # outside the capture: the set-aside handles are destroyed now
    assert not qoptim._deferred_handles


@pytest.mark.filterwarnings("ignore:The CUDA Graph is empty")
def test_capture_without_capturable_is_refused(cuda):
    params = params_on(cuda, (100,), seed=2)
    opt = qopt.FlashAdamW(params)
    set_grads(params, grads_for(params, seed=3))
    opt.step()  # warm-up
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="capturable is False"):
        with torch.cuda.graph(graph):
            opt.step()


def test_step_runs_on_the_current_stream(cuda):
    """A step issued on a side stream is ordered after work on that stream and before what
    follows on it, without any synchronization by qopt."""
    params = params_on(cuda, (1 << 20,), seed=4)
    twin = [torch.nn.Parameter(p.detach().clone()) for p in params]
    o1, o2 = qopt.FlashAdamW(params, lr=1e-2), qopt.FlashAdamW(twin, lr=1e-2)
    g = grads_for(params, seed=5)[0]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)       # keep the stream busy
        params[0].grad = g * 1              # produced on s
        o1.step()
        out = params[0].detach().clone()    # consumed on s
    twin[0].grad = g.clone()
    o2.step()
    torch.cuda.synchronize()
    assert torch.equal(out, twin[0].detach())


def test_cpu_state_dict_loads_onto_cuda_and_steps(cuda):
    cpu_params = params_on("cpu", (33, 65), (5,), seed=6)
    opt = qopt.FlashAdamW(cpu_params)
    opt.init_state()
    sd = copy.deepcopy(opt.state_dict())
    cuda_params = [torch.nn.Parameter(p.detach().to(cuda)) for p in cpu_params]
    o = qopt.FlashAdamW(cuda_params, lr=1e-2)
    o.load_state_dict(sd)
    assert all(v.device.type == "cuda" for st in o.state.values() for k, v in st.items() if k != "step")
    set_grads(cuda_params, grads_for(cuda_params, seed=7))
    o.step()
    assert all(int(o.state[p]["step"]) == 1 for p in cuda_params)
    assert all(torch.isfinite(p.detach().float()).all() for p in cuda_params)


@pytest.mark.parametrize("cls,kw", [(qopt.FlashAdamW, {}), (qopt.FlashAdamW, dict(master_weight_bits=32)),
                                    (qopt.FlashAdam, {}), (qopt.FlashSGD, dict(momentum=0.9, dampening=0.1)),
                                    (qopt.FlashSGDW, dict(momentum=0.9, nesterov=True, weight_decay=0.1)),
                                    (qopt.FlashLion, dict(weight_decay=0.1)), (qopt.AdamW8bit, {}),
                                    (qopt.AdamW8bit, dict(block_size=2048))],
                         ids=["adamw", "adamw_ecc16", "adam", "sgd", "sgdw", "lion", "adamw8bit",
                              "adamw8bit_2048"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32],
                         ids=["bf16", "fp16", "fp32"])
def test_cuda_equals_host_backend_bitwise(cuda, cls, kw, dtype):
    """The strict CUDA kernel and the host backend step identically (both match the C++ reference
    byte for byte); checked through the whole package: state, launch, checkpoints; for bf16, fp16
    and fp32 parameters (the <spec>, <spec>.f16 and <spec>.f32 kernels)."""
    if not backend_available("cpu"):
        pytest.skip("no host backend to compare with")
    shapes = [(1,), (31,), (4096,), (4097,), (3 * 4096 + 17,), (70, 1001)]
    gp = [torch.nn.Parameter(p.detach().to(dtype)) for p in params_on(cuda, *shapes, seed=8)]
    cp = [torch.nn.Parameter(p.detach().cpu().clone()) for p in gp]
    og, oc = cls(gp, lr=2e-3, **kw), cls(cp, lr=2e-3, **kw)
    for step in range(4):
        grads = [g.to(dtype) for g in
                 grads_for(cp, seed=20 + step, scale=1e-3 if step == 2 else 1e-2)]
        set_grads(cp, grads)
        set_grads(gp, [g.to(cuda) for g in grads])
        og.step()
        oc.step()
    for p, q in zip(gp, cp):
        assert torch.equal(bits(p), bits(q))
        for k in og.state[p]:
            assert torch.equal(bits(og.state[p][k]), bits(oc.state[q][k])), k


# ----------------------------------------------------------------------- GradScaler on CUDA

def _fused(opt, scale, found):
    opt.grad_scale, opt.found_inf = scale, found
    try:
        opt.step()
    finally:
        del opt.grad_scale, opt.found_inf


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32],
                         ids=["bf16", "fp16", "fp32"])
def test_grad_scaler_step_needs_no_host_sync(cuda, dtype):
    """A step under GradScaler (grad_scale and found_inf on the device) of a default optimizer
    (capturable=False): after the first, which moves the step counters to the device, no step
    synchronizes with the host, and a found_inf step is skipped there."""
    params = [torch.nn.Parameter(p.detach().to(dtype)) for p in params_on(cuda, (1000,), (4097,), seed=5)]
    opt = qopt.FlashAdamW(params)
    scale = torch.full((1,), 1024.0, device=cuda)
    found = torch.zeros((1,), device=cuda)
    set_grads(params, [1024 * g.to(dtype) for g in grads_for(params, seed=6)])
    _fused(opt, scale, found)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        _fused(opt, scale, found)  # a finite step
        found.fill_(1.0)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    before = [bits(p) for p in params]
    torch.cuda.set_sync_debug_mode("error")
    try:
        _fused(opt, scale, found)  # skipped on the device
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert all(torch.equal(bits(p), b) for p, b in zip(params, before))
    assert float(opt.state[params[0]]["step"]) == 2
    assert opt.state[params[0]]["step"].device.type == "cuda"


def test_cuda_graph_capture_with_grad_scaling(cuda):
    """GradScaler's tensors stay where they are across replays: a captured step unscales with the
    current scale and skips on the current found_inf, equal to eager fused steps."""
    shapes = [(1000,), (4097,), (64, 65)]
    graphed = params_on(cuda, *shapes, seed=11)
    eager = [torch.nn.Parameter(p.detach().clone()) for p in graphed]
    opt = qopt.FlashAdamW(graphed, capturable=True)
    ref = qopt.FlashAdamW(eager, capturable=True)
    scales = [1024.0, 1024.0, 2048.0, 2048.0, 512.0]
    founds = [0.0, 0.0, 0.0, 1.0, 0.0]
    all_grads = [[s * g for g in grads_for(graphed, seed=30 + i)] for i, s in enumerate(scales)]
    scale = torch.full((1,), scales[0], device=cuda)
    found = torch.zeros((1,), device=cuda)
    for p in graphed:
        p.grad = torch.zeros_like(p)
    opt.grad_scale, opt.found_inf = scale, found
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(2):
            copy_grads(graphed, all_grads[i])
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opt.step()
    for i in (2, 3, 4):
        copy_grads(graphed, all_grads[i])
        scale.fill_(scales[i])
        found.fill_(founds[i])
        graph.replay()
    del opt.grad_scale, opt.found_inf
    for i in range(5):
        set_grads(eager, all_grads[i])
        _fused(ref, torch.full((1,), scales[i], device=cuda), torch.full((1,), founds[i], device=cuda))
    torch.cuda.synchronize()
    for p, q in zip(graphed, eager):
        assert torch.equal(bits(p), bits(q))
        for k in opt.state[p]:
            assert torch.equal(bits(opt.state[p][k]), bits(ref.state[q][k])), k
    assert float(opt.state[graphed[0]]["step"]) == 4
