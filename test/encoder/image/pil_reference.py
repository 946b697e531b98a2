"""Reference for test/encoder/image/*.test.ts: what HuggingFace's PIL-based image processors compute, with PIL and
numpy only (Debian's python3-pil and python3-numpy; transformers is not installed).

usage: pil_reference.py <dir>   (the test wrote <dir>/job.json)

job.json: {"images": [{"name", "format", "width", "height", "mode", "orientation", "options"}],
           "configs": {"<name>": <preprocessor_config.json>}, "resizes": [{"name", "width", "height", "resample"}]}
Writes, for each image: <name> (the encoded file), <name>.rgb (PIL's RGB bytes after exif_transpose),
<name>.<config>.f32 (pixel_values of one image, float32 CHW); for each resize: <name>.src.rgb and <name>.out.rgb.
Prints a JSON manifest of the shapes.
"""
import json
import math
import sys

import numpy as np
from PIL import Image, ImageOps


def picture(width, height, seed):
    """Gradients, hard edges and noise: every filter and codec has something to do."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    r = (255 * x / max(1, width - 1)).astype(np.int32)
    g = (255 * y / max(1, height - 1)).astype(np.int32)
    b = np.where(((x // 5) + (y // 7)) % 2 == 0, 40, 210)
    noise = rng.integers(-20, 21, size=(height, width, 3))
    return np.clip(np.stack([r, g, b], axis=-1) + noise, 0, 255).astype(np.uint8)


def make_image(spec, path):
    rgb = picture(spec["width"], spec["height"], len(spec["name"]))
    image = Image.fromarray(rgb)
    mode = spec.get("mode", "RGB")
    if mode == "RGBA":
        alpha = (np.arange(spec["width"] * spec["height"]) % 256).astype(np.uint8).reshape(spec["height"], spec["width"])
        image.putalpha(Image.fromarray(alpha))
    elif mode in ("L", "LA"):
        image = image.convert(mode)
    elif mode == "I;16":
        # 16-bit grey, spanning values below and above 255
        image = Image.fromarray((rgb[:, :, 0].astype(np.uint16) * 3).astype(np.uint16))
    elif mode == "P":
        image = image.convert("P", palette=Image.Palette.ADAPTIVE, colors=spec.get("colors", 256))
    options = dict(spec.get("options", {}))
    if spec.get("orientation", 1) != 1:
        exif = Image.Exif()
        exif[0x0112] = spec["orientation"]
        options["exif"] = exif.tobytes()
    if spec["format"] == "gif" and spec.get("frames", 1) > 1:
        second = Image.fromarray(255 - rgb).convert("P", palette=Image.Palette.ADAPTIVE)
        image.save(path, "GIF", save_all=True, append_images=[second], **options)
    else:
        image.save(path, spec["format"].upper(), **options)


def load_image(path):
    """transformers.image_utils.load_image on a file: open, exif_transpose, convert("RGB")."""
    image = Image.open(path)
    image = ImageOps.exif_transpose(image)
    return image.convert("RGB")


def resize_output_size(width, height, size):
    """get_resize_output_image_size with default_to_square=False: (height, width)."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = size, int(size * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def center_crop(image, crop_height, crop_width):
    """transformers.image_transforms.center_crop on an HWC array."""
    orig_height, orig_width = image.shape[:2]
    top = (orig_height - crop_height) // 2
    bottom = top + crop_height
    left = (orig_width - crop_width) // 2
    right = left + crop_width
    if top >= 0 and bottom <= orig_height and left >= 0 and right <= orig_width:
        return image[top:bottom, left:right]
    new_height = max(crop_height, orig_height)
    new_width = max(crop_width, orig_width)
    new_image = np.zeros((new_height, new_width) + image.shape[2:], dtype=image.dtype)
    top_pad = math.ceil((new_height - orig_height) / 2)
    left_pad = math.ceil((new_width - orig_width) / 2)
    new_image[top_pad:top_pad + orig_height, left_pad:left_pad + orig_width] = image
    top, bottom, left, right = top + top_pad, bottom + top_pad, left + left_pad, right + left_pad
    return new_image[max(0, top):min(new_height, bottom), max(0, left):min(new_width, right)]


def process(rgb, config):
    """ViTImageProcessor / CLIPImageProcessor.preprocess on one RGB image, the fields set explicitly in `config`."""
    image = np.array(rgb)
    if config["do_resize"]:
        size = config["size"]
        if "shortest_edge" in size:
            height, width = resize_output_size(image.shape[1], image.shape[0], size["shortest_edge"])
        else:
            height, width = size["height"], size["width"]
        # image_transforms.resize: a uint8 array goes to PIL as it is, and comes back as uint8
        image = np.array(Image.fromarray(image).resize((width, height), resample=config["resample"], reducing_gap=None))
    if config.get("do_center_crop"):
        image = center_crop(image, config["crop_size"]["height"], config["crop_size"]["width"])
    if config["do_rescale"]:
        image = (image.astype(np.float64) * config["rescale_factor"]).astype(np.float32)
    if config["do_normalize"]:
        if not np.issubdtype(image.dtype, np.floating):
            image = image.astype(np.float32)
        mean = np.array(config["image_mean"], dtype=image.dtype)
        std = np.array(config["image_std"], dtype=image.dtype)
        image = (image - mean) / std
    return np.ascontiguousarray(image.transpose(2, 0, 1)).astype(np.float32)


def main():
    folder = sys.argv[1]
    with open(f"{folder}/job.json") as file:
        job = json.load(file)
    manifest = {"images": {}, "resizes": {}}
    for spec in job["images"]:
        path = f"{folder}/{spec['name']}"
        make_image(spec, path)
        rgb = load_image(path)
        rgb_bytes = np.array(rgb)
        rgb_bytes.tofile(f"{path}.rgb")
        shapes = {}
        for name, config in job["configs"].items():
            tensor = process(rgb, config)
            tensor.tofile(f"{path}.{name}.f32")
            shapes[name] = list(tensor.shape)
        manifest["images"][spec["name"]] = {"width": rgb.width, "height": rgb.height, "pixel_values": shapes}
    for spec in job["resizes"]:
        source = picture(spec["from_width"], spec["from_height"], 7)
        source.tofile(f"{folder}/{spec['name']}.src.rgb")
        out = np.array(Image.fromarray(source).resize((spec["width"], spec["height"]), resample=spec["resample"], reducing_gap=None))
        out.tofile(f"{folder}/{spec['name']}.out.rgb")
    print(json.dumps(manifest))


main()
