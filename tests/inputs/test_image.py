"""attnviz.inputs.image: patches as the tutorial's unfold cuts them, and images refused before decoding."""

from __future__ import annotations

import struct
import zlib

import pytest
import torch

from attnviz import inputs as I
from attnviz import limits


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width × height but whose data is a few bytes."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b""))


def test_patches_equal_the_tutorials_unfold_and_keep_channels_apart():
    gray = torch.rand(2, 1, 12, 12)
    ours, nH, nW = I.image_patches(gray, 4, 4)
    assert (nH, nW) == (3, 3)
    torch.testing.assert_close(ours, I.patches_like_the_tutorial(gray, 4, 4), rtol=0, atol=0)  # one channel
    rgb = torch.rand(1, 3, 8, 8)
    ours, _, _ = I.image_patches(rgb, 4, 4)
    first = rgb[0, :, :4, :4].reshape(-1)  # the top-left patch, every channel
    torch.testing.assert_close(ours[0, 0], first)
    assert not torch.equal(I.patches_like_the_tutorial(rgb, 4, 4)[0, 0], first)  # the tutorial's view mixes them
    overlap, nH, nW = I.image_patches(rgb, 4, 2)
    assert (nH, nW) == (3, 3) and overlap.shape == (1, 9, 48)


def test_a_decompression_bomb_is_refused_from_its_header():
    with pytest.raises(ValueError, match="claims 50,000 × 50,000 pixels.*not decoded"):
        I.read_image(png_header_only(50_000, 50_000))


@pytest.mark.parametrize("data, words", [(b"not an image at all", "not a PNG or JPEG"),
                                         (b"GIF89a" + b"\0" * 30, "not a PNG or JPEG"),
                                         (b"\0" * (limits.MAX_UPLOAD_BYTES + 1), "the limit is 5 MB")])
def test_files_that_are_not_images(data, words):
    with pytest.raises(ValueError, match=words):
        I.read_image(data)


def test_a_patch_larger_than_the_image():
    with pytest.raises(ValueError, match="larger than the image"):
        I.image_input(I.sample_image("shapes", 32), 48, 48, 16, 0)
