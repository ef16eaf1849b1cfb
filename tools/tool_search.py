"""Tool search: with hundreds of tools, bind only the few that fit this turn's request.

Every tool definition costs prompt tokens on every request, and a model choosing among hundreds of
look-alike tools chooses worse. ``ToolSearch`` ranks a catalog against the request; ``select_tools`` turns
the ranking into the per-turn set to bind; the ``find_tools`` meta-tool lets the model ask for more when
nothing bound fits, and ``loaded_from_messages`` carries what it found into the next round.

Ranking is hybrid, like the knowledge base's: BM25 over ``stores.text_analysis.tokenize`` (so Chinese is
segmented) and, with an embedder, cosine over embeddings, fused by rank (``stores.fusion.rrf``). Domains
are scored the same way against the request and the tools of the best ones get a third, lighter ranking,
so "订一张去成都的机票" favours travel tools even when a word also fits maps or finance. Permissions filter
before ranking: a tool the caller may not use is never a candidate, so it cannot take a slot.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Annotated

import numpy as np
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import Field

from stores.embeddings import Embedder
from stores.fusion import rrf
from stores.text_analysis import tokenize
from tools.registry import CallContext, ToolContext, ToolError, ToolRegistry, ToolSpec

if TYPE_CHECKING:
    import bm25s

FIND_TOOLS = "find_tools"
MAX_QUERY_CHARS = 1_000  # a pasted page says little more about the tool than its first and last lines
CANDIDATES = 50  # per-retriever list length fed to the fusion
BEST_DOMAINS = 2
DOMAIN_WEIGHT = 0.5  # the domain ranking nudges, it does not override what the tools' own texts say
KEYWORD_WEIGHT = 0.5  # BM25 against the embeddings in the fusion (measured on the fixture: 0.3–0.5 best)
FIND_TOOLS_MAX = 20
QUERY_CACHE_SIZE = 64

Allowed = Callable[[ToolSpec], bool]
AllowedFactory = Callable[[ToolContext], Allowed]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def name_words(name: str) -> str:
    """``get_weatherNow`` -> ``get weather Now``: a name's words, so they meet the request's words."""
    return " ".join(word for part in re.split(r"[_\-\s.]+", name) for word in _CAMEL.split(part) if word)


def tool_text(spec: ToolSpec) -> str:
    """What a tool is searched by: its name twice (the most precise words), description and domain."""
    words = name_words(spec.name)
    return f"{words}. {words}. {spec.description} ({name_words(spec.domain)})"


def clip_query(query: str, limit: int = MAX_QUERY_CHARS) -> str:
    """The request's head and tail when it is long: the ask is usually stated first or last."""
    query = query.strip()
    if len(query) <= limit:
        return query
    half = limit // 2
    return f"{query[:half]} … {query[-half:]}"


class _Keywords:
    """BM25 (bm25s) over pre-tokenized documents; rows keep their input order."""

    def __init__(self, documents: Sequence[list[str]]) -> None:
        import bm25s  # scipy and numba: paid when the first index is built, not on import

        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self.vocab: dict[str, int] = {}
        corpus = [[self.vocab.setdefault(term, len(self.vocab)) for term in doc] for doc in documents]
        self.model: bm25s.BM25 | None = None
        self.size = len(documents)
        if any(corpus):  # bm25s cannot index a corpus without a single term
            self.model = bm25s.BM25()
            self.model.index((corpus, self.vocab), create_empty_token=False, show_progress=False)

    def scores(self, terms: Iterable[str], mask: np.ndarray | None = None) -> np.ndarray:
        """Score per row (0 where no term matches or the mask is 0); each distinct term counts once."""
        columns = sorted({self.vocab[term] for term in terms if term in self.vocab})
        if self.model is None or not columns:
            return np.zeros(self.size, dtype=np.float32)
        return self.model.get_scores_from_ids(columns, weight_mask=mask)


def _ranked(scores: np.ndarray, keep: np.ndarray, limit: int) -> list[int]:
    """Rows with ``keep`` and a positive score, best first (ties by row), at most ``limit``."""
    rows = np.flatnonzero(keep & (scores > 0))
    order = np.lexsort((rows, -scores[rows]))[:limit]
    return [int(row) for row in rows[order]]


class ToolSearch:
    """A search index over a tool catalog: BM25, optional embeddings and domain routing, fused by RRF."""

    def __init__(
        self,
        specs: Iterable[ToolSpec],
        *,
        embedder: Embedder | None = None,
        domain_weight: float = DOMAIN_WEIGHT,
        keyword_weight: float = KEYWORD_WEIGHT,
    ) -> None:
        self.specs: tuple[ToolSpec, ...] = tuple(specs)
        self._row: dict[str, int] = {}
        for row, spec in enumerate(self.specs):
            if spec.name in self._row:
                raise ValueError(f"the tool catalog has two tools named {spec.name!r}; names must be unique")
            self._row[spec.name] = row
        self.embedder = embedder
        self.domain_weight = domain_weight
        self.keyword_weight = keyword_weight
        texts = [tool_text(spec) for spec in self.specs]
        self._tools = _Keywords([tokenize(text) for text in texts])
        self.domains: tuple[str, ...] = tuple(dict.fromkeys(spec.domain for spec in self.specs))
        domain_index = {domain: i for i, domain in enumerate(self.domains)}
        self._domain_of = np.array([domain_index[s.domain] for s in self.specs], dtype=np.int64)
        pooled: list[list[str]] = [tokenize(name_words(domain)) * 3 for domain in self.domains]
        for spec, text in zip(self.specs, texts, strict=True):
            pooled[domain_index[spec.domain]].extend(tokenize(text))
        self._domains = _Keywords(pooled)
        self._lock = threading.Lock()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._vectors: np.ndarray | None = None
        self._centroids: np.ndarray | None = None
        if embedder is not None and self.specs:
            self._vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
            sums = np.zeros((len(self.domains), self._vectors.shape[1]), dtype=np.float32)
            np.add.at(sums, self._domain_of, self._vectors)
            self._centroids = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)

    def __len__(self) -> int:
        return len(self.specs)

    def __contains__(self, name: object) -> bool:
        return name in self._row

    def get(self, name: str) -> ToolSpec | None:
        row = self._row.get(name)
        return None if row is None else self.specs[row]

    def search(self, query: str, k: int = 8, allowed: Allowed | None = None) -> list[tuple[str, float]]:
        """Up to ``k`` ``(tool name, fused score)`` best first, among the tools ``allowed`` accepts."""
        query = clip_query(query or "")
        if k <= 0 or not query or not self.specs:
            return []
        keep = np.fromiter(
            (allowed is None or bool(allowed(spec)) for spec in self.specs), dtype=bool, count=len(self.specs)
        )
        if not keep.any():
            return []
        terms = tokenize(query)
        mask = keep.astype(np.float32)
        pool = max(CANDIDATES, 4 * k)
        rankings: dict[str, list[int]] = {"bm25": _ranked(self._tools.scores(terms, mask), keep, pool)}
        query_vector = None
        if self._vectors is not None and self.embedder is not None:
            query_vector = self._query_vector(query)
            similarity = self._vectors @ query_vector
            # cosine can be <= 0 for a relevant tool; shift so every allowed row ranks
            rankings["vector"] = _ranked(similarity - similarity.min() + 1e-6, keep, pool)
        weights = {"bm25": self.keyword_weight if query_vector is not None else 1.0}
        base = rrf({name: [str(row) for row in rows] for name, rows in rankings.items()}, weights=weights)
        if not base:
            return []
        order = [int(row) for row, _, _ in base]
        best = self._best_domains(terms, query_vector, keep)
        if best and self.domain_weight > 0:
            place = {domain: i for i, domain in enumerate(best)}
            in_domain = [row for row in order if int(self._domain_of[row]) in place]
            in_domain.sort(key=lambda row: place[int(self._domain_of[row])])  # stable: keeps base order
            rankings["domain"] = in_domain
        fused = rrf(
            {name: [str(row) for row in rows] for name, rows in rankings.items()},
            weights={**weights, "domain": self.domain_weight},
        )
        return [(self.specs[int(row)].name, score) for row, score, _ in fused[:k]]

    def _query_vector(self, query: str) -> np.ndarray:
        """The request's embedding, remembered: every model round of a turn searches the same request."""
        assert self.embedder is not None
        with self._lock:
            found = self._queries.get(query)
            if found is not None:
                self._queries.move_to_end(query)
                return found
        vector = np.asarray(self.embedder.embed_query(query), dtype=np.float32)
        with self._lock:
            self._queries[query] = vector
            while len(self._queries) > QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return vector

    def _best_domains(self, terms: list[str], query_vector: np.ndarray | None, keep: np.ndarray) -> list[int]:
        """The domains that best fit the request, among those with at least one allowed tool."""
        if len(self.domains) < 2:
            return []
        open_domains = np.zeros(len(self.domains), dtype=bool)
        open_domains[self._domain_of[keep]] = True
        rankings = {
            "bm25": [str(i) for i in _ranked(self._domains.scores(terms), open_domains, BEST_DOMAINS)]
        }
        if query_vector is not None and self._centroids is not None:
            similarity = self._centroids @ query_vector
            shifted = similarity - similarity.min() + 1e-6
            rankings["vector"] = [str(i) for i in _ranked(shifted, open_domains, BEST_DOMAINS)]
        return [int(domain) for domain, _, _ in rrf(rankings)[:BEST_DOMAINS]]


_cache_lock = threading.Lock()
_cache: OrderedDict[tuple[tuple[str, str, str], ...], ToolSearch] = OrderedDict()
_CACHE_SIZE = 8


def search_for(specs: Sequence[ToolSpec]) -> ToolSearch:
    """A keyword-only index over ``specs``, built once per distinct catalog (registries rarely change)."""
    key = tuple((spec.name, spec.description, spec.domain) for spec in specs)
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    built = ToolSearch(specs)
    with _cache_lock:
        _cache[key] = built
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return built


def select_tools(
    registry_or_specs: ToolRegistry | Iterable[ToolSpec],
    query: str,
    *,
    k: int = 8,
    allowed: Allowed | None = None,
    loaded: Iterable[str] = (),
    search: ToolSearch | None = None,
) -> list[ToolSpec]:
    """The tools to bind for this round, in an order that keeps the request's prefix (so the
    endpoint's prompt cache still applies).

    A catalog of at most ``k`` allowed tools that are not always on is bound whole, in catalog order,
    without searching (nor ``find_tools``, which would have nothing to find). Otherwise: every
    ``always_on`` tool and ``find_tools`` (the same for every question), then the best search hits for
    ``query`` up to ``k`` tools that are not always on (the same in every round of a turn: the query is
    the turn's question), each group in catalog order; the ``loaded`` ones the model found with
    ``find_tools`` earlier in the turn come last, in the order found. So a round only ever appends
    tools to the previous round's list, and the tool definitions at the head of a request stay a
    prefix a provider can reuse.
    """
    specs = list(registry_or_specs)
    visible = [spec for spec in specs if allowed is None or allowed(spec)]
    catalog = [spec for spec in visible if spec.name != FIND_TOOLS]
    if sum(not spec.always_on for spec in catalog) <= k:
        return catalog
    by_name = {spec.name: spec for spec in catalog}
    fixed = [spec for spec in visible if spec.always_on or spec.name == FIND_TOOLS]
    hits: set[str] = set()
    if k > 0 and query.strip():
        index = search if search is not None else search_for(specs)
        found = index.search(query, k=k, allowed=lambda spec: spec.name in by_name and not spec.always_on)
        hits = {name for name, _ in found}
    searched = [spec for spec in catalog if spec.name in hits]
    chosen = {spec.name for spec in [*fixed, *searched]}
    later = [by_name[name] for name in dict.fromkeys(loaded) if name in by_name and name not in chosen]
    return [*fixed, *searched, *later]


FIND_TOOLS_DESCRIPTION = (
    "Find more tools for the current task. Call it when none of the tools you have fits what the user "
    "asks; describe the action in a few words, in the user's language or English (e.g. 'cancel a hotel "
    "booking', '查询快递物流'). The tools it returns become callable in your next step. Do not call it "
    "when a tool you already have fits, and do not guess tool names it did not return."
)
def find_tools_spec(
    search_provider: ToolSearch | Callable[[], ToolSearch] | Callable[[ToolContext], ToolSearch],
    *,
    allowed: AllowedFactory | None = None,
) -> ToolSpec:
    """The ``find_tools(query, limit=5)`` meta-tool, always bound, returning matches the caller may use.

    ``search_provider`` is the index or a callable returning the current one (so a registry that grows
    is searched as it is now); ``allowed`` turns the call's ToolContext into the caller's permission
    predicate. Always-on tools are never returned: they are bound already.
    """

    def find_tools(
        query: Annotated[str, Field(min_length=1, description="What you need to do, in a few words.")],
        limit: Annotated[int, Field(ge=1, le=FIND_TOOLS_MAX, description="How many tools to return.")] = 5,
        *,
        tool_context: CallContext,
    ) -> str:
        if not query.strip():
            raise ToolError("find_tools needs a query: describe the action you need, e.g. 'book a flight'")
        if isinstance(search_provider, ToolSearch):
            index = search_provider
        else:  # a provider may take the call's ToolContext (to pick the run's embedder, say)
            wants = bool(inspect.signature(search_provider).parameters)
            index = search_provider(tool_context) if wants else search_provider()  # type: ignore[call-arg]
        permitted = allowed(tool_context) if allowed is not None else None

        def usable(spec: ToolSpec) -> bool:
            if spec.name == FIND_TOOLS or spec.always_on:
                return False
            return permitted is None or bool(permitted(spec))

        hits = index.search(query, k=max(1, min(limit, FIND_TOOLS_MAX)), allowed=usable)
        found = [index.get(name) for name, _ in hits]
        tools = [
            {"name": spec.name, "description": spec.description, "domain": spec.domain}
            for spec in found
            if spec is not None
        ]
        return json.dumps({"tools": tools}, ensure_ascii=False)

    return ToolSpec.of(
        find_tools,
        name=FIND_TOOLS,
        description=FIND_TOOLS_DESCRIPTION,
        timeout=10.0,
        permissions=(),
        domain="general",
        always_on=True,
    )


def loaded_from_messages(messages: Sequence[BaseMessage]) -> list[str]:
    """Tool names that successful ``find_tools`` calls returned in the current turn, first found first."""
    start = 0
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            start = i + 1
            break
    turn = messages[start:]
    asked = {
        call["id"]
        for message in turn
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] == FIND_TOOLS and call.get("id")
    }
    names: dict[str, None] = {}
    for message in turn:
        if not isinstance(message, ToolMessage) or message.status == "error":
            continue
        if message.name != FIND_TOOLS and message.tool_call_id not in asked:
            continue
        try:
            payload = json.loads(message.content) if isinstance(message.content, str) else None
        except ValueError:
            continue
        tools = payload.get("tools") if isinstance(payload, dict) else None
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                names.setdefault(tool["name"], None)
    return list(names)
