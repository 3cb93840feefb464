"""What the MCP tools say to the model: each tool's description, written for the model and for
where the server stands, and the instructions an HTTP session gets at the handshake (a stdio
server's come from ``standing.instructions``).

Descriptions name the server's own space only, never another's.
"""

from server.mcp.standing import Standing

HTTP_INSTRUCTIONS = (
    "esfis keeps memories: short, self-contained facts that should outlive this conversation "
    "(decisions, conventions, how things work here, the user's preferences). Recall before you "
    "start a task or when you lack context; remember what a later session will need.\n\n"
    "This session works in the space it was opened in (its token's scope, or the space named in "
    "its URL): recall sees that space, the spaces below it and, for an unscoped token, the user's "
    "personal memories; it never sees other spaces, and no argument can change that."
)


def _where(standing: Standing | None) -> str:
    if standing is None:
        return (
            "This session works in the space it was opened in: it sees that space, the spaces below "
            "it, and (for an unscoped token) the user's personal memories, and nothing of any other space."
        )
    if standing.space is None:
        return "This server stands in no space: only personal memories are within reach."
    return (
        f"This server works in space {standing.space!r}: it sees that space, the spaces below it, "
        "and the user's personal memories, and nothing of any other space."
    )


def descriptions(standing: Standing | None) -> dict[str, str]:
    where = _where(standing)
    target = (
        "It goes into the space this session works in, seen only by agents working there; set "
        "personal=true for facts about the user that hold in every project."
        if standing is None
        else "This server stands in no space, so only personal memories can be written: set "
        "personal=true, and keep to facts about the user that hold in every project."
        if standing.space is None
        else f"It goes into space {standing.space!r}, seen only by agents working there; set "
        "personal=true for facts about the user that hold in every project."
    )
    return {
        "remember": (
            "Store one memory: a short, self-contained fact that a later session should know, such "
            "as a decision, a convention, how something works here, or a preference the user "
            "stated. Use it when you learn something durable that is not obvious from the code; "
            "do not store secrets, passwords or tokens, or what is only true for this one task. "
            'Write it so it makes sense on its own ("Acme\'s login uses Auth0", not "it uses '
            f'Auth0"), one fact per memory. {target} Set `labels` (e.g. ["source:slack"]) when the '
            "fact comes from outside (slack, email, a webhook, a web page). Set `data` (a small JSON "
            'object, e.g. {"kind": "decision", "project": "billing", "due": "2027-01-31T00:00:00Z"}) '
            "for what you will want to select by later with recall's `filter`; the text stays the fact "
            "itself. esfis follows what this "
            "session has read: a write that would carry one space's data where it may not go is "
            "refused (data_barrier), or, into personal memories, needs a person's approval: then "
            "nothing is written yet and the answer is an approval (apr_…) to check with "
            "check_approval. Returns the new id and its labels. A fact this space already holds is "
            "not stored twice: the answer is then the memory already there, with `duplicate_of` set. "
            "When the answer lists `similar` memories (id, score), read them: if one says the same "
            'thing with an older value ("uses Okta" after "uses Auth0"), it is now outdated: call '
            "replace with its id and the new text, so only the current fact stays current. Pass "
            "dedupe=false only to store a repetition on purpose."
        ),
        "recall": (
            "Find the memories that best answer a question or fit a task: conventions, past "
            "decisions, how things work here, the user's preferences. Call it before you start a "
            'task and whenever you lack context; ask in plain words ("how does login work?"). '
            f"{where} There is no argument to look anywhere else. `filter` narrows to memories whose "
            '`data` matches before ranking: {"kind": "decision"} is equality; a condition may also be '
            '{"$ne": v}, {"$gt"/"$gte"/"$lt"/"$lte": number or ISO time}, {"$in": [..]} or '
            '{"$exists": true}; several fields must all hold. With a filter and an empty query, the '
            "newest matching memories come back. To ask what was believed at an earlier time, set "
            "`as_of` to an ISO 8601 time: the memories valid then, those replaced since included. "
            "Returns up to `limit` memories, best first, each "
            "with id, text, space (null: personal), score and data."
        ),
        "replace": (
            "Supersede a memory with corrected or updated text: the old one stops being current "
            "and the new one takes its place, keeping the trail. Use it when a recalled memory is "
            "outdated or wrong, rather than storing a second fact that contradicts it. Leave "
            "`space` out and the new memory stays in the old one's space. The new memory carries "
            "the `data` you give, none of the old one's otherwise. Returns the new id."
        ),
        "forget": (
            "Delete a memory for good: its text leaves the store. Use it only for a memory that "
            "should never have been kept (wrong, private, a secret) or when the user asks; to "
            "correct a fact, use replace. If this session has read content from an outside source "
            "(a memory with an origin mark), a person must approve: the answer may then be an "
            "approval (apr_…) to check with check_approval. forget(apr_…) withdraws a call of this "
            "session that waits for approval."
        ),
        "check_approval": (
            "Ask whether a call of this session that waited for a person's approval (an id apr_… "
            "that remember, replace or forget answered) was approved and applied, declined, or "
            "expired. Approved: `memory` is the id it wrote. Do not retry a held call; check it."
        ),
        "share": (
            "Make a context reference to memories you can see, to hand to another agent instead "
            "of copying their text: it names the memories with their labels, never their text. "
            "Returns the reference (ctx_…)."
        ),
        "open_context": (
            "Open a context reference (ctx_…) another agent shared: returns its memories with "
            "their labels, if this session may read data of where they come from. What you open "
            "counts as read by this session, like recall."
        ),
    }
