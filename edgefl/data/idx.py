"""IDX files (the MNIST file format) and the MNIST-family loaders.

Format (LeCun, http://yann.lecun.com/exdb/mnist/): a 4-byte magic number ``0x00 0x00 T D``
where ``T`` is the element type code and ``D`` the number of dimensions, then ``D`` sizes as
big-endian uint32, then the elements in C order, big-endian. Files may be gzip-compressed.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np

from edgefl.data.errors import DataError
from edgefl.input_files import special_file

# IDX element type code -> numpy dtype (big-endian, as stored).
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

# The four files of every MNIST-family dataset, without the ``.gz`` suffix.
SPLIT_FILES: dict[str, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}

# Published md5 checksums of the official ``.gz`` files.
# MNIST: the published checksums (also /work/shared/datasets/README.md for t10k);
# Fashion-MNIST: github.com/zalandoresearch/fashion-mnist; KMNIST: github.com/rois-codh/kmnist.
# All twelve are the ones torchvision's MNIST / FashionMNIST / KMNIST classes verify.
KNOWN_MD5: dict[str, dict[str, str]] = {
    "mnist": {
        "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
        "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
        "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
        "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    },
    "fashion_mnist": {
        "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
        "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
        "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
        "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
    },
    "kmnist": {
        "train-images-idx3-ubyte.gz": "bdb82020997e1d708af4cf47b453dcf7",
        "train-labels-idx1-ubyte.gz": "e144d726b3acfaa3e44228e80efcd344",
        "t10k-images-idx3-ubyte.gz": "5c965bf0a639b31b8f53240b1b52f4d7",
        "t10k-labels-idx1-ubyte.gz": "7320c461ea6c1c855c0b718fb2a4b134",
    },
}

DISPLAY_NAMES: dict[str, str] = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST",
    "kmnist": "Kuzushiji-MNIST",
}

DOWNLOAD_PAGES: dict[str, str] = {
    "mnist": "http://yann.lecun.com/exdb/mnist/ (mirror: https://ossci-datasets.s3.amazonaws.com/mnist/)",
    "fashion_mnist": "https://github.com/zalandoresearch/fashion-mnist",
    "kmnist": "https://github.com/rois-codh/kmnist",
}

NUM_CLASSES = 10  # all three datasets have ten classes


def _read_bytes(path: Path) -> bytes:
    special = special_file(path)  # before reading: a named pipe would block, a device never end
    if special is not None:
        raise DataError(f"IDX file '{path}' is {special}, not a regular file; put the data set's files there")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read IDX file '{path}': {exc.strerror or exc}") from None


def _decompress(raw: bytes, path: Path) -> bytes:
    if path.suffix != ".gz":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError) as exc:
        raise DataError(
            f"'{path}' is not a valid gzip file ({exc}); re-download it, or decompress it "
            f"yourself and keep the raw file without the .gz suffix"
        ) from None


def parse_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """Decode the bytes of an (uncompressed) IDX file into a native-endian array."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DataError(
            f"'{source}' is not an IDX file: expected magic bytes 0x00 0x00 <type> <ndim>; "
            f"check that it is one of the dataset's *-idx?-ubyte files"
        )
    type_code, ndim = data[2], data[3]
    if type_code not in IDX_DTYPES:
        raise DataError(
            f"'{source}' has unknown IDX element type 0x{type_code:02X}: expected one of "
            + ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        )
    header_len = 4 + 4 * ndim
    if len(data) < header_len:
        raise DataError(f"'{source}' is truncated: the IDX header needs {header_len} bytes")
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[type_code]
    count = int(np.prod(shape, dtype=np.int64))
    expected = header_len + count * dtype.itemsize
    if len(data) != expected:
        raise DataError(
            f"'{source}' has {len(data)} bytes but its IDX header (shape {shape}, "
            f"{dtype.itemsize}-byte elements) implies {expected}; the file is truncated or "
            f"corrupt, re-download it"
        )
    array = np.frombuffer(data, dtype=dtype, count=count, offset=header_len).reshape(shape)
    return array.astype(dtype.newbyteorder("="))  # native byte order, writable copy


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file, raw or gzip-compressed (``.gz`` suffix), into a native numpy array."""
    path = Path(path)
    return parse_idx(_decompress(_read_bytes(path), path), str(path))


def _find_file(directory: Path, stem: str) -> Path | None:
    """``stem.gz`` if present, else the raw ``stem``, else None."""
    for candidate in (directory / f"{stem}.gz", directory / stem):
        if candidate.is_file():
            return candidate
    return None


# Files decoded in this process: (path, data set, verify_md5) -> (the file's bytes, the parsed array, read-only). A
# sweep's runs read the same files once per run (the Figure-4 study: 60 runs of MNIST-10k, 40 ms of gunzip and md5
# each); the file is read each time and decoded again unless its bytes are the ones decoded (no trust in mtimes).
# load_idx_dataset hands out copies, or the arrays themselves to a caller that only reads them (``shared``).
_DECODED: dict[tuple, tuple[bytes, np.ndarray]] = {}
_DECODED_MAX = 8  # files kept (the four of one data set, twice); the oldest dropped first


def _read_checked(path: Path, name: str, verify_md5: bool) -> np.ndarray:
    """The parsed file (read-only, shared: copy it before changing it), decoded once per process (_DECODED)."""
    raw = _read_bytes(path)
    key = (str(path.resolve()), name, verify_md5)
    cached = _DECODED.get(key)
    if cached is not None and cached[0] == raw:
        return cached[1]
    array = _decode_checked(raw, path, name, verify_md5)
    array.setflags(write=False)
    _DECODED.pop(key, None)
    while len(_DECODED) >= _DECODED_MAX:
        del _DECODED[next(iter(_DECODED))]
    _DECODED[key] = (raw, array)
    return array


def _decode_checked(raw: bytes, path: Path, name: str, verify_md5: bool) -> np.ndarray:
    expected = KNOWN_MD5.get(name, {}).get(path.name)
    if verify_md5 and expected is not None:
        actual = hashlib.md5(raw).hexdigest()
        if actual != expected:
            raise DataError(
                f"'{path}' has md5 {actual}, but the official {DISPLAY_NAMES[name]} file has "
                f"md5 {expected}: the file is corrupt or from another dataset; re-download it "
                f"from {DOWNLOAD_PAGES[name]}, or load with verify_md5=False for a modified copy"
            )
    return parse_idx(_decompress(raw, path), str(path))


def _nearby_copies(directory: Path, stem: str) -> list[Path]:
    """Directories one or two levels below ``directory`` holding ``stem`` (e.g. torchvision's raw/)."""
    found = list(directory.glob(f"*/{stem}*")) + list(directory.glob(f"*/*/{stem}*"))
    return sorted({p.parent for p in found})


def _missing_files_error(name: str, directory: Path) -> DataError:
    images, labels = SPLIT_FILES["test"]
    message = (
        f"data.dir '{directory}' has no {DISPLAY_NAMES[name]} files: expected {images}(.gz) and "
        f"{labels}(.gz) (and optionally the train-* pair); download them from "
        f"{DOWNLOAD_PAGES[name]} or set data.name = 'synthetic'"
    )
    nearby = _nearby_copies(directory, images)
    if nearby:
        message += f"; found them in '{nearby[0]}', use that directory instead"
    return DataError(message)


def _load_split(
    name: str, directory: Path, split: str, verify_md5: bool, shared: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    images_stem, labels_stem = SPLIT_FILES[split]
    images_path = _find_file(directory, images_stem)
    labels_path = _find_file(directory, labels_stem)
    if images_path is None and labels_path is None:
        return None
    if images_path is None or labels_path is None:
        present, absent = (images_path, labels_stem) if labels_path is None else (labels_path, images_stem)
        raise DataError(
            f"data.dir '{directory}' has '{present.name}' but not {absent}(.gz): the {split} "
            f"split needs both files; download the missing one from {DOWNLOAD_PAGES[name]}"
        )
    images = _read_checked(images_path, name, verify_md5)
    labels = _read_checked(labels_path, name, verify_md5)
    if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
        raise DataError(
            f"'{images_path}' holds {images.dtype} data of shape {images.shape}: expected uint8 "
            f"images of shape [n, 28, 28]; check that it is the {DISPLAY_NAMES[name]} images file"
        )
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise DataError(
            f"'{labels_path}' holds shape {labels.shape} but '{images_path.name}' has "
            f"{images.shape[0]} images: expected one label per image; the files do not belong together"
        )
    labels = labels.astype(np.int64)  # (a copy: the caller's own)
    if not shared:
        images = images.copy()  # (the caller's own, writable)
    if labels.size and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
        raise DataError(
            f"'{labels_path}' has labels in [{labels.min()}, {labels.max()}]: expected 0..{NUM_CLASSES - 1}"
        )
    return images, labels


def load_idx_dataset(
    name: str, directory: str | Path, *, verify_md5: bool = True, shared: bool = False
) -> dict[str, tuple[np.ndarray, np.ndarray] | None]:
    """Load an MNIST-family dataset from ``directory``.

    Returns ``{"train": (images, labels) or None, "test": (images, labels)}`` with images uint8
    ``[n, 28, 28]`` and labels int64 ``[n]``. Each file may be ``.gz`` or raw; a ``.gz`` file with a
    published checksum (``KNOWN_MD5``) is verified unless ``verify_md5`` is False. The test split
    must exist; the train split is optional (the shared checkout holds MNIST t10k only).
    Each file is decoded once per process (while unchanged); ``shared=True`` gives that decoded images array
    itself, read-only (for a caller that only reads it: no copy), else a copy of its own.
    """
    if name not in KNOWN_MD5:
        raise DataError(f"unknown IDX dataset {name!r}: expected one of {', '.join(sorted(KNOWN_MD5))}")
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError(
            f"data.dir '{directory}' does not exist or is not a directory: expected a directory "
            f"holding the {DISPLAY_NAMES[name]} IDX files; download them from "
            f"{DOWNLOAD_PAGES[name]} or set data.name = 'synthetic'"
        )
    test = _load_split(name, directory, "test", verify_md5, shared)
    if test is None:
        raise _missing_files_error(name, directory)
    return {"train": _load_split(name, directory, "train", verify_md5, shared), "test": test}
