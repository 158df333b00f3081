#!/usr/bin/python3
"""Writes a log-mel spectrogram front end of the kind speech models export (the STFT as a strided 1-D
Conv whose filters are the windowed cosines and sines, power, a mel filterbank MatMul, Log), the shape
issue 21 measured: 16 kHz audio, reflect padding of n_fft / 2 at each end (torch.stft's center=True),
n_fft 512 (257 bins), hop 160, 80 mel bands. In the ONNX backend-test layout: OUT/model.onnx,
OUT/test_data_set_0/input_0.pb and output_0.pb, the expected output from a float64 numpy DFT written
independently of nxrt. A benchmark of a one-input-channel conv with a long kernel and a long stride,
then a small MatMul and elementwise ops.

    tools/make_mel_frontend.py OUT_DIR [--seconds S]   (default 1 s: 101 frames)
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_toy_cnn import save_case  # noqa: E402  (the same file layout)

RATE = 16000
N_FFT = 512
HOP = 160
N_MELS = 80
EPS = 1e-6


def mel_filterbank(n_bins, n_mels, rate):
    """Triangular filters on the HTK mel scale, [n_bins, n_mels] (slaney-style area normalisation left
    out: any fixed matrix serves a benchmark, and the reference uses the same one)."""
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    freqs = np.linspace(0, rate / 2, n_bins)
    edges = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(rate / 2), n_mels + 2))
    fb = np.zeros((n_bins, n_mels))
    for m in range(n_mels):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        up = (freqs - lo) / (mid - lo)
        down = (hi - freqs) / (hi - mid)
        fb[:, m] = np.maximum(0.0, np.minimum(up, down))
    return fb


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default="build/mel_frontend")
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    rng = np.random.default_rng(2121)
    f = np.float32
    samples = int(round(args.seconds * RATE))
    if samples <= N_FFT // 2:
        sys.exit(f"make_mel_frontend: --seconds {args.seconds} gives {samples} samples; reflect padding needs more than {N_FFT // 2}")
    bins = N_FFT // 2 + 1
    pad = N_FFT // 2
    frames = (samples + 2 * pad - N_FFT) // HOP + 1

    # The STFT's filters: the periodic Hann window times cos / -sin of each bin's frequency.
    n = np.arange(N_FFT)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * n / N_FFT)
    k = np.arange(bins)[:, None]
    cos_w = window * np.cos(2 * np.pi * k * n / N_FFT)
    sin_w = -window * np.sin(2 * np.pi * k * n / N_FFT)
    w_stft = np.concatenate([cos_w, sin_w])[:, None, :].astype(f)  # [2 * bins, 1, N_FFT]
    mel = mel_filterbank(bins, N_MELS, RATE).astype(f)               # [bins, N_MELS]

    inits = [
        numpy_helper.from_array(w_stft, "stft_filters"),
        numpy_helper.from_array(mel, "mel_filters"),
        numpy_helper.from_array(np.array([0, 0, pad, 0, 0, pad], np.int64), "pads"),
        numpy_helper.from_array(np.array([1], np.int64), "axis1"),
        numpy_helper.from_array(np.array([0], np.int64), "start_re"),
        numpy_helper.from_array(np.array([bins], np.int64), "start_im"),
        numpy_helper.from_array(np.array([2 * bins], np.int64), "end_im"),
        numpy_helper.from_array(np.array(EPS, f), "eps"),
    ]
    nodes = [
        helper.make_node("Unsqueeze", ["waveform", "axis1"], ["wave3"], name="to_ncw"),
        helper.make_node("Pad", ["wave3", "pads"], ["padded"], name="center_pad", mode="reflect"),
        helper.make_node("Conv", ["padded", "stft_filters"], ["spec"], name="stft", strides=[HOP]),
        helper.make_node("Slice", ["spec", "start_re", "start_im", "axis1"], ["re"], name="real"),
        helper.make_node("Slice", ["spec", "start_im", "end_im", "axis1"], ["im"], name="imag"),
        helper.make_node("Mul", ["re", "re"], ["re2"], name="re_sq"),
        helper.make_node("Mul", ["im", "im"], ["im2"], name="im_sq"),
        helper.make_node("Add", ["re2", "im2"], ["power"], name="power"),
        helper.make_node("Transpose", ["power"], ["power_t"], name="frames_first", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["power_t", "mel_filters"], ["mel_power"], name="mel"),
        helper.make_node("Add", ["mel_power", "eps"], ["mel_eps"], name="floor"),
        helper.make_node("Log", ["mel_eps"], ["log_mel"], name="log"),
    ]
    graph = helper.make_graph(nodes, "mel_frontend",
                              [helper.make_tensor_value_info("waveform", TensorProto.FLOAT, [1, samples])],
                              [helper.make_tensor_value_info("log_mel", TensorProto.FLOAT, [1, frames, N_MELS])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="nxrt-mel-frontend")
    model.ir_version = 8
    onnx.checker.check_model(model)

    # Reference in float64: reflect-pad, frame, a direct DFT per frame, power, mel, log.
    x = (0.3 * rng.standard_normal((1, samples))).astype(f)
    xp = np.pad(x[0].astype(np.float64), pad, mode="reflect")
    idx = np.arange(frames)[:, None] * HOP + n[None, :]
    fr = xp[idx]                                                  # [frames, N_FFT]
    re = fr @ cos_w.astype(f).astype(np.float64).T                # the float32 filters, as the model holds them
    im = fr @ sin_w.astype(f).astype(np.float64).T
    log_mel = np.log((re * re + im * im) @ mel.astype(np.float64) + float(f(EPS))).astype(f)[None]

    save_case(args.out, model, {"waveform": x}, {"log_mel": log_mel})
    print(f"wrote {args.out}/model.onnx and its test data ({samples} samples, {frames} frames x {N_MELS} mels)")


if __name__ == "__main__":
    main()
