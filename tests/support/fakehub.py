"""The Hugging Face hub, offline, for the tests of attnviz.models.hub's downloads."""

from __future__ import annotations

import shutil
from pathlib import Path


class FakeHub:
    """The hub, offline: ``model_info`` lists a built folder's files (and a pickled copy and a file in a
    sub-folder, which must not be fetched); ``snapshot_download`` lays the asked files out in the hub layout."""

    def __init__(self, folder, monkeypatch, commit: str = "0" * 40):
        import huggingface_hub

        self.folder, self.calls, self.listed = folder, [], []
        files = [p.name for p in folder.iterdir()]
        siblings = [huggingface_hub.hf_api.RepoSibling(rfilename=n, size=(folder / n).stat().st_size) for n in files]
        siblings += [huggingface_hub.hf_api.RepoSibling(rfilename="pytorch_model.bin", size=10),
                     huggingface_hub.hf_api.RepoSibling(rfilename="onnx/model.safetensors", size=10)]

        def model_info(api, repo_id, **kw):
            self.listed.append(repo_id)
            assert kw.get("files_metadata") is True
            return type("Info", (), {"siblings": siblings})()

        def snapshot_download(repo_id, *, cache_dir, allow_patterns, **kw):
            self.calls.append((repo_id, sorted(allow_patterns)))
            repo = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
            (repo / "snapshots" / commit).mkdir(parents=True)
            for name in allow_patterns:
                shutil.copy(folder / name, repo / "snapshots" / commit / name)
            (repo / "refs").mkdir()
            (repo / "refs" / "main").write_text(commit)
            return str(repo / "snapshots" / commit)

        monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
        monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)


def cache(home: Path, model_id: str, folder: Path, commit: str = "0" * 40) -> Path:
    """``folder`` copied into the local hub cache under ``home`` (what ``HF_HOME`` names) as the hub lays a
    download out: hub/models--org--name/snapshots/<commit>/, with refs/main naming that commit. Returns
    the repository's folder (models--org--name)."""
    repo = Path(home) / "hub" / ("models--" + model_id.replace("/", "--"))
    shutil.copytree(folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit + "\n")
    return repo
