"""Writes small OCI images for the image tests, from the host's static
busybox: KIND is `layout` (an OCI image layout folder, gzip then plain
layers), `zstd` (the same with a zstd first layer of several frames and a
skippable one, as zstd:chunked writes them), `docker` (a `docker save` tar), `evil` (a layout whose second
layer writes through a symlink the first made to HOST_DIR) or `corrupt`
(a layout whose layer does not match its digest).

Usage: make_image.py KIND OUT [HOST_DIR]
"""

import gzip
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import tarfile

KIND, OUT = sys.argv[1], sys.argv[2]
TOOLS = ["sh", "cat", "ls", "echo", "find", "stat", "mkdir", "tar", "sleep", "env"]


def tar_of(entries):
    """entries: (name, kind, data-or-target, mode)"""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode = mode
            info.mtime = 1700000000
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            elif kind == "link":
                info.type = tarfile.SYMTYPE
                info.linkname = data
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def base_layer():
    busybox = open("/bin/busybox", "rb").read()
    e = [("bin", "dir", None, 0o755), ("bin/busybox", "file", busybox, 0o755),
         ("etc", "dir", None, 0o755), ("etc/old.txt", "file", b"old\n", 0o644),
         ("etc/passwd", "file", b"root:x:0:0:root:/root:/bin/sh\n", 0o644),
         ("data", "dir", None, 0o755), ("data/a", "file", b"a\n", 0o644),
         ("data/b", "file", b"b\n", 0o644), ("tmp", "dir", None, 0o1777)]
    e += [(f"bin/{t}", "link", "busybox", 0o777) for t in TOOLS]
    return tar_of(e)


def second_layer():
    return tar_of([("etc", "dir", None, 0o755), ("etc/.wh.old.txt", "file", b"", 0o644),
                   ("etc/greeting", "file", b"hello from the image\n", 0o644),
                   ("data", "dir", None, 0o755), ("data/.wh..wh..opq", "file", b"", 0o644),
                   ("data/c", "file", b"c\n", 0o644)])


CONFIG = json.dumps({"architecture": "amd64", "os": "linux",
                     "config": {"Env": ["PATH=/bin", "IMAGE_VAR=from-image"],
                                "WorkingDir": "/data", "User": "65534:65533"},
                     "rootfs": {"type": "layers", "diff_ids": []}}).encode()


def zstd(data):
    """Two zstd frames with a skippable frame between them."""
    def frame(part):
        return subprocess.run(["zstd", "-q", "-c"], input=part, capture_output=True, check=True).stdout
    half = len(data) // 2
    skip = struct.pack("<II", 0x184D2A50, 5) + b"extra"
    return frame(data[:half]) + skip + frame(data[half:])


def layout(layers, corrupt=False):
    os.makedirs(os.path.join(OUT, "blobs", "sha256"))

    def put(data):
        d = hashlib.sha256(data).hexdigest()
        with open(os.path.join(OUT, "blobs", "sha256", d), "wb") as f:
            f.write(data)
        return {"digest": "sha256:" + d, "size": len(data)}

    descs = []
    for i, (data, how) in enumerate(layers):
        blob = {"gzip": lambda d: gzip.compress(d, mtime=0), "zstd": zstd, None: lambda d: d}[how](data)
        desc = put(blob)
        if corrupt and i == 0:
            path = os.path.join(OUT, "blobs", "sha256", desc["digest"][7:])
            raw = bytearray(open(path, "rb").read())
            raw[len(raw) // 2] ^= 0xff
            open(path, "wb").write(bytes(raw))
        desc["mediaType"] = "application/vnd.oci.image.layer.v1.tar" + ("+" + how if how else "")
        descs.append(desc)
    config = put(CONFIG)
    config["mediaType"] = "application/vnd.oci.image.config.v1+json"
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": config, "layers": descs}).encode()
    m = put(manifest)
    m["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
    json.dump({"schemaVersion": 2, "manifests": [m]}, open(os.path.join(OUT, "index.json"), "w"))
    json.dump({"imageLayoutVersion": "1.0.0"}, open(os.path.join(OUT, "oci-layout"), "w"))


if KIND == "layout":
    layout([(base_layer(), "gzip"), (second_layer(), None)])
elif KIND == "zstd":
    layout([(base_layer(), "zstd"), (second_layer(), None)])
elif KIND == "corrupt":
    layout([(base_layer(), "gzip"), (second_layer(), None)], corrupt=True)
elif KIND == "evil":
    host = sys.argv[3]
    layout([(base_layer(), "gzip"),
            (tar_of([("escape", "link", host, 0o777)]), None),
            (tar_of([("escape/pwned", "file", b"written outside\n", 0o644)]), None)])
elif KIND == "docker":
    entries = [("manifest.json", "file", json.dumps([{"Config": "config.json", "RepoTags": ["t:1"],
                                                      "Layers": ["l1/layer.tar", "l2/layer.tar"]}]).encode(), 0o644),
               ("config.json", "file", CONFIG, 0o644),
               ("l1", "dir", None, 0o755), ("l1/layer.tar", "file", base_layer(), 0o644),
               ("l2", "dir", None, 0o755), ("l2/layer.tar", "file", second_layer(), 0o644)]
    open(OUT, "wb").write(tar_of(entries))
