"""A small notes server over MCP (stdio), kept in SQLite; used by ``tools.d/notes.yaml`` and
``agents.d/note_taker.yaml``. Written with the official SDK's server side (``MCPServer``, formerly FastMCP).

Run by hand: ``python tools.d/notes_server.py`` (it speaks MCP on stdin/stdout). The database file is
``$NOTES_DB`` (default ``.thinkflow/notes.sqlite3``, relative to the working directory).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("notes", log_level="WARNING")

MAX_RESULTS = 20


def _db() -> sqlite3.Connection:
    path = Path(os.environ.get("NOTES_DB", ".thinkflow/notes.sqlite3"))
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL)")
    return db


@server.tool()
def add_note(title: str, body: str) -> dict[str, Any]:
    """Save a note with a short title and a body; returns its id."""
    if not title.strip():
        raise ToolError("the title is empty")
    with _db() as db:
        cursor = db.execute("INSERT INTO notes (title, body) VALUES (?, ?)", (title.strip(), body))
        return {"id": cursor.lastrowid, "title": title.strip()}


@server.tool()
def search_notes(query: str) -> list[dict[str, Any]]:
    """Notes whose title or body contains the query (case-insensitive), newest first, at most 20."""
    pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    with _db() as db:
        rows = db.execute("SELECT id, title, body FROM notes WHERE title LIKE ? ESCAPE '\\' OR body LIKE ? "
                          "ESCAPE '\\' ORDER BY id DESC LIMIT ?", (pattern, pattern, MAX_RESULTS)).fetchall()
    return [{"id": i, "title": t, "body": b} for i, t, b in rows]


@server.tool()
def delete_note(id: int) -> str:
    """Delete the note with this id."""
    with _db() as db:
        if db.execute("DELETE FROM notes WHERE id = ?", (id,)).rowcount == 0:
            raise ToolError(f"no note with id {id}")
    return f"deleted note {id}"


if __name__ == "__main__":
    server.run()
