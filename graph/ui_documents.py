"""The chat page's documents area: what the knowledge base holds for the caller, and, for roles that may
change it (``kb:admin``, as the ``delete_document`` tool), adding a file, deleting one to the trash and
restoring it.

A reader (``kb:read``) sees only the documents their groups may read, with the listing of
``kb-agent documents list`` (:func:`stores.knowledge.listing.list_documents`). An upload obeys what
``kb-agent ingest`` obeys: the supported file types, ``max_file_mb``, access groups given or public.
Everything that touches the stores runs in the thread pool: the server's event loop never waits on a file.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from graph.services import services_for
from graph.ui_http import Refusal, caller_settings, guarded, json_response, needs
from nodes.settings import Settings
from stores.knowledge.documents import SUPPORTED
from stores.knowledge.groups import clean_groups
from stores.knowledge.listing import list_documents, upload_folder, visible_to
from tools.permissions import grant_for

EXAMPLES = 3


def _knowledge(settings: Settings, *, create: bool = False) -> Any:
    return services_for(settings).knowledge(create=create)


async def overview(request: Request) -> Response:
    """What the empty conversation shows: how many documents the caller may read, in which languages, and
    a few of their titles to ask about (nothing for a caller who may not read the knowledge base)."""
    settings = caller_settings(request)
    if not grant_for(settings).allows("kb:read"):
        return json_response({"documents": 0, "languages": [], "titles": []})

    def read() -> dict[str, Any]:
        kb = _knowledge(settings)
        entries = [] if kb is None else list_documents(kb, settings.group_list)
        languages = sorted({lang for e in entries for lang in e.languages})
        titles = list(dict.fromkeys(e.title for e in entries if e.title))[:EXAMPLES]
        return {"documents": len(entries), "languages": languages, "titles": titles}

    return json_response(await run_in_threadpool(read))


async def documents(request: Request) -> Response:
    """The documents the caller's groups may read, newest first; ``?q=`` keeps those whose title or file
    holds its words."""
    settings = caller_settings(request)
    needs(settings, "kb:read")
    query = request.query_params.get("q", "")[:200]

    def read() -> list[dict[str, Any]]:
        kb = _knowledge(settings)
        return [] if kb is None else [e.as_dict() for e in list_documents(kb, settings.group_list, query)]

    listed = await run_in_threadpool(read)
    return json_response({"documents": listed, "may_change": grant_for(settings).allows("kb:admin")})


def upload_name(name: str) -> str:
    """The file name an upload is kept and cited under, or a refusal that says what a valid one is."""
    clean = PurePosixPath(name.replace("\\", "/")).name.strip()
    if not clean or clean.startswith(".") or "\x00" in clean or clean != name.strip():
        raise Refusal(422, "name: a file name without folders, e.g. policy.md")
    if PurePosixPath(clean).suffix.lower() not in SUPPORTED:
        kinds = " ".join(sorted(SUPPORTED))
        raise Refusal(415, f"{clean}: this file type cannot be added (supported: {kinds})")
    return clean


async def upload(request: Request) -> Response:
    """Add one file (the request's body, named by ``?name=``, in ``?groups=`` or public), as ``kb-agent
    ingest`` would: a file too big, of another type or unreadable is refused and nothing else changes."""
    settings = caller_settings(request)
    needs(settings, "kb:admin")
    name = upload_name(request.query_params.get("name", ""))
    groups = clean_groups(request.query_params.get("groups", "").split(","))
    data = await request.body()
    if not data:
        raise Refusal(422, f"{name} is empty")
    limit = round(settings.max_file_mb * 1024 * 1024)
    if limit and len(data) > limit:
        raise Refusal(413, f"{name} is larger than {settings.max_file_mb:g} MiB, the largest file allowed")

    def add() -> dict[str, Any]:
        folder = Path(upload_folder(settings.data_dir, settings.user_id))  # kept: a re-ingest finds it
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        earlier = path.read_bytes() if path.exists() else None  # what the index holds stays on disk too
        path.write_bytes(data)
        report = _knowledge(settings, create=True).ingest([path], groups=groups or None)
        if report.skipped:
            if earlier is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(earlier)
            raise Refusal(422, f"{name} was not added: {report.skipped[0][1]}")
        state = "added" if report.added else "updated" if report.updated else "unchanged"
        return {
            "source": name,
            "status": state,
            "chunks": report.chunks_written,
            "groups": groups or ["public"],
        }

    return json_response(await run_in_threadpool(add))


async def delete(request: Request) -> Response:
    """Move one document to the trash (kept ``trash_days`` days, restorable from the trash)."""
    settings = caller_settings(request)
    needs(settings, "kb:admin")
    source = request.path_params["source"]

    def remove() -> dict[str, Any]:
        kb = _knowledge(settings)
        record = None if kb is None else kb.manifest.get(source)
        if record is None or not visible_to(record.groups, settings.group_list):
            raise Refusal(404, f"no document {source!r}")
        chunks, trash_id = kb.delete_to_trash(source)
        return {"source": source, "chunks": chunks, "trash_id": trash_id}

    return json_response(await run_in_threadpool(remove))


async def trash(request: Request) -> Response:
    """The deleted documents that can still be restored."""
    settings = caller_settings(request)
    needs(settings, "kb:admin")

    def read() -> list[dict[str, Any]]:
        kb = _knowledge(settings)
        items = [] if kb is None else kb.trash.items()
        return [i.as_dict() for i in items if visible_to(i.groups, settings.group_list)]

    return json_response({"trash": await run_in_threadpool(read)})


async def restore(request: Request) -> Response:
    """Put a deleted document back as it was."""
    from stores.knowledge.trash import TrashError

    settings = caller_settings(request)
    needs(settings, "kb:admin")
    try:
        trash_id = int(request.path_params["trash_id"])
    except ValueError:
        raise Refusal(404, "trash ids are numbers") from None

    def put_back() -> dict[str, Any]:
        kb = _knowledge(settings)
        if kb is None:
            raise Refusal(404, f"nothing in the trash with id {trash_id}")
        try:
            record = kb.restore(trash_id)
        except TrashError as exc:
            raise Refusal(409, str(exc)) from None
        return {"source": record.source, "chunks": len(record.chunk_ids)}

    return json_response(await run_in_threadpool(put_back))


DOCUMENT_ROUTES = [
    Route("/ui/api/overview", guarded(overview)),
    Route("/ui/api/documents", guarded(documents), methods=["GET"]),
    Route("/ui/api/documents", guarded(upload), methods=["POST"]),
    Route("/ui/api/documents/{source:path}", guarded(delete), methods=["DELETE"]),
    Route("/ui/api/trash", guarded(trash)),
    Route("/ui/api/trash/{trash_id}/restore", guarded(restore), methods=["POST"]),
]
