"""Files made for the upload tests (a PNG that lies about its size, a silent WAV) and an upload
handed to a page as the file uploader would."""

from __future__ import annotations

import io
import struct
import wave
import zlib


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width × height but whose data is a few bytes."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b""))


def wav_bytes(seconds: float, rate: int = 1000, width: int = 1) -> bytes:
    """A silent mono WAV of ``seconds``."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(bytes(int(rate * seconds) * width))
    return buf.getvalue()


def upload(monkeypatch, data: bytes, name: str) -> None:
    """The page's next upload is ``data`` named ``name``."""
    import ui.widgets

    monkeypatch.setattr(ui.widgets, "uploaded_bytes", lambda *a, **k: (data, name))
