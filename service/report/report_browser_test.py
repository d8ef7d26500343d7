"""Renders reports made by `placement_offline report` in headless Chromium and checks what a person
would see: the screenshot is not blank, and the DOM Chromium built has one Gantt lane and one memory
lane per device. Exit status 77 (CTest: skipped) when chromium is not installed.

    python3 service/report/report_browser_test.py PLACEMENT_OFFLINE_BINARY SOURCE_DIR

Standard library only (the PNG is decoded with zlib), so it runs with any python3.
"""
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

SKIPPED = 77
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDTH, HEIGHT = 1400, 1000


def browser(workdir, *args):
    command = [shutil.which("chromium"), *BROWSER_FLAGS, f"--user-data-dir={workdir / 'profile'}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def screenshot(workdir, html_path):
    png = workdir / (html_path.stem + ".png")
    browser(workdir, f"--screenshot={png}", f"--window-size={WIDTH},{HEIGHT}", html_path.as_uri())
    assert png.exists(), f"no screenshot of {html_path}"
    return png.read_bytes()


def decode_png(data):
    """(width, height, filtered scanlines): enough of PNG to check the image is real and not empty."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, header = 8, b"", None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        position += 12 + length
    width, height, depth, colour_type = header[:4]
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour_type]
    pixels = zlib.decompress(idat)
    assert len(pixels) == height * (1 + width * channels * depth // 8), "truncated image data"
    return width, height, pixels


def busy_fraction(pixels):
    """Share of non-zero bytes in the filtered scanlines: a plain white page filters to almost all
    zeros; bars, lines and text do not."""
    return 1.0 - pixels.count(0) / len(pixels)


def main():
    offline, source = Path(sys.argv[1]), Path(sys.argv[2])
    if shutil.which("chromium") is None:
        print("chromium is not installed: skipped")
        return SKIPPED
    with tempfile.TemporaryDirectory() as temp:
        workdir = Path(temp)
        blank = workdir / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body></body></html>")
        blank_png = screenshot(workdir, blank)
        _, _, blank_pixels = decode_png(blank_png)

        request = source / "tests/data/requests/bert_l3_training.json.gz"
        report = workdir / "report.html"
        made = subprocess.run([str(offline), "report", f"--request={request}", "--algorithm=pardnn,m_topo",
                               f"--out={report}", "--time_limit_s=20"], capture_output=True, text=True,
                              timeout=300)
        assert made.returncode == 0, made.stderr
        devices = len(set(re.findall(r'<g class="lane" data-device="([^"]*)"', report.read_text())))
        assert devices >= 2, "the request has several devices"

        report_png = screenshot(workdir, report)
        width, height, pixels = decode_png(report_png)
        assert (width, height) == (WIDTH, HEIGHT), (width, height)
        print(f"screenshot: {len(report_png)} bytes (blank page {len(blank_png)}), non-zero filtered "
              f"bytes {busy_fraction(pixels):.3f} (blank page {busy_fraction(blank_pixels):.3f})")
        assert len(report_png) > 4 * len(blank_png), "the screenshot looks blank"
        assert busy_fraction(pixels) > busy_fraction(blank_pixels) + 0.01, "the screenshot looks blank"

        dom = browser(workdir, "--dump-dom", report.as_uri()).stdout
        lanes = len(re.findall(r'<g class="lane"', dom))
        memory_lanes = len(re.findall(r'<g class="memory-lane"', dom))
        runs = len(re.findall(r'<svg class="gantt"', dom))
        print(f"DOM: {runs} Gantt charts, {lanes} lanes, {memory_lanes} memory lanes, {devices} devices")
        assert runs == 2, "one Gantt chart per algorithm"
        assert lanes == runs * devices, "one lane per device in every Gantt chart"
        assert memory_lanes == runs * devices, "one memory lane per device in every run"
        assert 'class="compare"' in dom
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
