"""A hypothesis state machine over ingest / delete / prune / a crashing ingest / reopen / trash: the
manifest, Chroma and BM25 hold the same chunk ids after every step, and search serves only those."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from stores.embeddings import HashingEmbedder
from stores.knowledge.knowledge_base import KnowledgeBase

NAMES = ("a.md", "b.md", "c.md", "sub/d.md")
TEXTS = (
    "Annual leave is fifteen days.",
    "## One\n\nHotels are refunded.\n\n## Two\n\nTrains are second class.",
    "年假为十五天，需提前申请。",
    "Expenses need a receipt. " * 40,
)


class Crashing(HashingEmbedder):
    """Fails the document batch that contains ``CRASH`` (the endpoint dies in the middle of an ingest)."""

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if any("CRASH" in t for t in texts):
            raise RuntimeError("embedding endpoint went away")
        return super().embed_documents(texts)


class KnowledgeMachine(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kb-sm-"))
        self.docs = self.root / "docs"
        self.docs.mkdir()
        self.kb = self._open()
        self.trashed: list[int] = []

    def _open(self) -> KnowledgeBase:
        return KnowledgeBase(self.root / "home", embedder=Crashing(), trash_days=7)

    def teardown(self) -> None:
        shutil.rmtree(getattr(self, "root", Path("/nonexistent")), ignore_errors=True)

    @rule(name=st.sampled_from(NAMES), text=st.sampled_from(TEXTS), crash=st.booleans())
    def write_and_ingest(self, name: str, text: str, crash: bool) -> None:
        path = self.docs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + ("\n\nCRASH" if crash else ""), encoding="utf-8")
        with contextlib.suppress(RuntimeError):  # the ingest dies: files finished before it are kept
            self.kb.ingest([self.docs])

    @rule(name=st.sampled_from(NAMES))
    def remove_file_and_prune(self, name: str) -> None:
        (self.docs / name).unlink(missing_ok=True)
        with contextlib.suppress(RuntimeError):  # a crashing file left in the folder fails the re-ingest
            self.kb.ingest([self.docs], prune=True)

    @rule(name=st.sampled_from(NAMES))
    def delete(self, name: str) -> None:
        _, trash_id = self.kb.delete_to_trash(name)
        if trash_id is not None:
            self.trashed.append(trash_id)

    @precondition(lambda self: bool(self.trashed))
    @rule()
    def restore_last(self) -> None:
        trash_id = self.trashed.pop()
        with contextlib.suppress(LookupError):  # ingested again meanwhile: refused, nothing lost
            self.kb.restore(trash_id)

    @rule()
    def reopen(self) -> None:
        self.kb = self._open()

    @invariant()
    def the_three_stores_agree(self) -> None:
        if not hasattr(self, "kb"):
            return
        ids = self.kb.index_ids()
        assert ids["chroma"] == ids["bm25"] == ids["manifest"], ids
        for mode in ("vector", "bm25", "hybrid"):
            served = {p["id"] for p in self.kb.search("leave hotels expenses 年假", top_k=20, mode=mode)}
            assert served <= ids["manifest"], (mode, served - ids["manifest"])


KnowledgeMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_knowledge_state_machine = KnowledgeMachine.TestCase
