"""``render``: the oracle counterfactual backend (synthetic data only).

The synthetic generator (``biaslab.data.synthetic``) draws every image from independent streams
(background, placement box, objects, cast, person appearance). For a work item of image i and
a target group g', candidate j is ``biaslab.data.synthetic.render_scene(i, gender=g',
appearance_seed=seed_j)``: the *same* scene re-drawn with a person of group g' whose colours
and arm pose come from the candidate's own seed (``candidate_seed`` of paper 000 Eq. 1's
``x_i^(j,g')``). Nothing else is drawn differently, so a candidate differs from its source only
inside omega = the union of the original and the new person's masks (the body shapes of the
two genders differ, so omega is not the source person's mask); there are no inpainting seams,
no donor and no prompt to follow. It separates what the method does (decorrelating context
from gender) from what a generator's artifacts do: ``copy_paste`` / ``sd_inpaint`` on the same
data measure the artifact cost.

The backend reads the dataset's generator arguments (``annotations/synth_params.json``) and
truth (``annotations/synth_truth.csv``) from the data root, so it needs no parameters of its
own. Before drawing counterfactuals of an image it re-draws the original and checks that it
equals the source image pixel for pixel (``InputError`` otherwise: the data root is not the
dataset the prepared tables came from, or another renderer version wrote it). The mask omega
of the ``masks`` stage is not used (it is the source person's mask only); the prompt and the
guidance scale are recorded for schema parity and ignored. Candidates are lossless PNGs
(``image_format``) so that pixels outside omega stay bit-identical to the source.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from biaslab.data import synthetic as S
from biaslab.data.groups import group_parts
from biaslab.runtime.io import InputError


class RenderBackend:
    """Oracle counterfactuals re-drawn by the synthetic generator (module docstring).

    Args:
        data_root: the synthetic dataset directory (params ``data.root``).

    Raises:
        InputError: ``data_root`` is not a synthetic dataset of this renderer version.
    """

    name = "render"
    #: candidates are written losslessly (``generate_candidates`` reads this).
    image_format = "png"

    def __init__(self, data_root: str | Path):
        self.root = Path(data_root)
        self.params = S.read_generator_params(self.root)
        self.truth = S.read_truth(self.root)
        self.seed = int(self.params["seed"])
        self.size = int(self.params["image_size"])
        self._originals: OrderedDict[int, S.Rendering] = OrderedDict()
        self.verified = 0

    def fingerprint(self) -> dict:
        """Cheap identity of the backend: renderer version and the dataset's generator
        arguments (a change re-renders every shard)."""
        return {"name": self.name, "render_version": S.RENDER_VERSION,
                "params": dict(self.params), "image_format": self.image_format}

    def _truth(self, image_id: int) -> dict:
        t = self.truth.get(int(image_id))
        if t is None:
            raise InputError(self.root / "annotations" / "synth_truth.csv",
                             f"no row for image {image_id}: the prepared tables do not come "
                             f"from this synthetic dataset")
        return t

    def original(self, image_id: int, image: np.ndarray | None = None,
                 path: str | None = None) -> S.Rendering:
        """The re-drawn source image (cached for the two groups of an image); checked against
        ``image`` (H, W, 3) uint8 when given.

        Raises:
            InputError: the re-drawn image differs from ``image``."""
        iid = int(image_id)
        r = self._originals.get(iid)
        if r is None:
            t = self._truth(iid)
            r = S.render_scene(iid, seed=self.seed, image_size=self.size, gender=t["gender"],
                               scene=t["scene"], cast=t["cast"], objects=t["objects"])
            if image is not None:
                if image.shape != r.image.shape or not np.array_equal(image, r.image):
                    n = (int((image != r.image).any(-1).sum())
                         if image.shape == r.image.shape else "all")
                    raise InputError(path or f"image {iid}",
                                     f"differs from the synthetic generator's re-drawing "
                                     f"({n} pixels): the image is not image {iid} of the "
                                     f"dataset in {self.root} (seed {self.seed}, size "
                                     f"{self.size})")
                self.verified += 1
            self._originals[iid] = r
            while len(self._originals) > 4:
                self._originals.popitem(last=False)
        return r

    def render(self, image_id: int, group: str, seed: int) -> S.Rendering:
        """Image ``image_id`` re-drawn with a person of ``group`` whose appearance comes from
        ``seed``. ``group`` is a target group of any attribute
        (``biaslab.data.groups.group_parts``): a gender sets the body shape (a
        skin-tone group keeps the image's true gender), a skin tone moves the drawn skin
        colour into that half of the palette (a gender group leaves it to the draw).

        Raises:
            ValueError: unknown group."""
        gender, skin = group_parts(group)
        t = self._truth(image_id)
        return S.render_scene(int(image_id), seed=self.seed, image_size=self.size,
                              gender=gender or t["gender"], scene=t["scene"], cast=t["cast"],
                              objects=t["objects"], appearance_seed=int(seed), skin=skin)

    def omega(self, image_id: int, group: str, seed: int) -> np.ndarray:
        """(H, W) bool mask omega of a candidate: the union of the original and the new
        person's masks (every pixel the candidate may differ in)."""
        return self.original(image_id).person_mask | self.render(image_id, group,
                                                                 seed).person_mask

    def generate(self, item, image: np.ndarray, mask: np.ndarray, group: str, prompt: str,
                 js: Sequence[int], seeds: Sequence[int], scales: Sequence[float]
                 ) -> list[tuple[np.ndarray, list | None]]:
        """Candidates j (``seeds[j]`` = appearance seed) of ``item`` (``image_id``, ``path``)
        for ``group``: ``[(image (H, W, 3) uint8, None)]`` (no donors). ``mask``, ``prompt``
        and ``scales`` are ignored (module docstring).

        Raises:
            InputError: the source image is not the generator's (``original``).
            RuntimeError: a candidate changed a pixel outside omega (a generator bug)."""
        iid = int(item["image_id"])
        orig = self.original(iid, np.asarray(image), str(item.get("path", "")))
        out = []
        for sd in seeds:
            r = self.render(iid, group, sd)
            outside = (r.image != orig.image).any(-1) & ~(r.person_mask | orig.person_mask)
            if outside.any():
                raise RuntimeError(f"render: candidate of image {iid} ({group}, seed {sd}) "
                                   f"changed {int(outside.sum())} pixels outside the persons")
            out.append((r.image, None))
        return out

    def redraw_region(self, item, image: np.ndarray, mask: np.ndarray, group: str,
                      seed: int) -> np.ndarray:
        """Oracle inpainting of a region (the synthetic-artifact test, ``biaslab.analysis.artifact``):
        image ``item["image_id"]`` re-drawn with a person of ``group`` whose appearance comes
        from ``seed``, copied into ``image`` inside ``mask`` only.

        This is paper 000 sec. 3.3's "inpaint a random body part with the caption as the
        prompt" with the generator itself as the inpainter: the region is re-drawn for the
        caption's gender (``group`` = the person's own group keeps the body shape of that
        gender), so the test changes the appearance inside the region (colours, arm pose)
        but no gender cue, and adds no seam beyond the region's colour change.

        Args:
            item: ``{"image_id", "path"}`` of the source image.
            image: (H, W, 3) uint8, the source image (checked against the re-drawing).
            mask: (H, W) 0/1 or bool, the region.
            group: "female" / "male".
            seed: appearance seed of the re-drawn person.

        Returns:
            (H, W, 3) uint8; pixels outside ``mask`` equal ``image``.

        Raises:
            InputError: the source image is not the generator's (``original``).
            ValueError: ``mask`` does not have the image's height and width.
        """
        iid = int(item["image_id"])
        img = np.asarray(image)
        orig = self.original(iid, img, str(item.get("path", "")))
        if img.shape != orig.image.shape or not np.array_equal(img, orig.image):
            # original() checks only when it draws; a cached original is checked here
            raise InputError(item.get("path") or f"image {iid}",
                             f"differs from the synthetic generator's re-drawing: the image "
                             f"is not image {iid} of the dataset in {self.root}")
        m = np.asarray(mask).astype(bool)
        if m.shape != img.shape[:2]:
            raise ValueError(f"render: mask {m.shape} does not match image {img.shape[:2]} "
                             f"of image {iid}")
        r = self.render(iid, group, int(seed))
        out = img.copy()
        out[m] = r.image[m]
        return out


__all__ = ["RenderBackend"]
