#!/usr/bin/python3
"""Inputs of TestSSIMCameraReference, rebuilt as scikit-image's SSIM tests build them.

Usage: /usr/bin/python3 attacks/inversion/testdata/ssim_camera.py CAMERA_PNG OUT_DIR
then FEDAUDIT_SSIM_CAMERA=OUT_DIR go test ./attacks -run TestSSIMCameraReference -v

CAMERA_PNG is scikit-image's data/camera.png (the 512 x 512 grey image used since 2020, in the
scikit-image repository; it is not redistributed here). The noisy copy is made exactly as in
scikit-image's test module: np.random.seed(5), then clip(camera + 20 * randn(512, 512), 0, 255)
cast to uint8. Needs python3-numpy and python3-pil (Debian).
"""
import os
import sys

import numpy as np
from PIL import Image

cam = np.asarray(Image.open(sys.argv[1]))
assert cam.shape == (512, 512) and cam.dtype == np.uint8, (cam.shape, cam.dtype)
np.random.seed(5)
noisy = np.clip(cam + 20.0 * np.random.randn(*cam.shape), 0, 255).astype(cam.dtype)
os.makedirs(sys.argv[2], exist_ok=True)
cam.tofile(os.path.join(sys.argv[2], "camera.u8"))
noisy.tofile(os.path.join(sys.argv[2], "camera_noisy.u8"))
