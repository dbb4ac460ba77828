"""DLPack on a GPU: a PyTorch CUDA tensor passes into kiln without a copy, through a compiled
function, and back. Skips without a GPU, a CUDA build of kiln, or PyTorch with CUDA."""

import pytest

import kiln

torch = pytest.importorskip("torch")
if not (torch.cuda.is_available() and kiln.cuda_available()):
    pytest.skip("needs a GPU, kiln's CUDA backend and PyTorch with CUDA", allow_module_level=True)


def test_torch_tensor_through_a_compiled_function_and_back():
    gen = torch.Generator(device="cuda").manual_seed(7)
    t = torch.randn(256, 512, device="cuda", generator=gen)
    torch.cuda.synchronize()
    x = kiln.from_dlpack(t)
    assert x.device == kiln.cuda(0)
    assert x.shape == (256, 512)

    f = kiln.compile(lambda a: kiln.exp(a) * 2.0 + a)
    y = f(x)
    out = torch.from_dlpack(y)
    assert out.device == t.device
    torch.testing.assert_close(out, torch.exp(t) * 2.0 + t, rtol=1e-5, atol=1e-5)

    # In: kiln reads t's memory in place, so a change to t shows in the next call.
    t.mul_(0.5)
    torch.cuda.synchronize()
    torch.testing.assert_close(torch.from_dlpack(f(x)), torch.exp(t) * 2.0 + t, rtol=1e-5, atol=1e-5)

    # Out: every export views kiln's one buffer.
    assert torch.from_dlpack(y).data_ptr() == out.data_ptr()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int32"])
def test_dtypes_both_ways(dtype):
    t = (torch.arange(96, device="cuda", dtype=torch.float32).reshape(8, 12) - 40.5).to(getattr(torch, dtype))
    torch.cuda.synchronize()
    x = kiln.from_dlpack(t)
    back = torch.from_dlpack(x + x)
    assert back.dtype == t.dtype and back.device == t.device
    torch.testing.assert_close(back, t + t)


def test_strided_torch_view_is_read_as_strided():
    base = torch.randn(64, 48, device="cuda")
    view = base.t()[:, ::2]  # transposed and stepped: no copy makes it row-major
    torch.cuda.synchronize()
    x = kiln.from_dlpack(view)
    torch.testing.assert_close(torch.from_dlpack(x * 3.0), view * 3.0)
