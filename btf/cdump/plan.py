"""What the header defines, and in which order: libbpf's btf_dump ordering
and emitting walks, with no text made.

* Types are visited in id order.  A depth-first walk (``order``, libbpf's
  ``btf_dump_order_type``) queues the named definitions a type needs: a
  *strong* link (embedding by value, or through an anonymous type that is
  printed inline) needs the full definition first; a *weak* link (through a
  pointer to a named type) only needs a forward declaration.
* Each queued type is then emitted (``emit``, libbpf's
  ``btf_dump_emit_type``): a struct that is being defined and is used
  through a pointer before its definition gets ``struct X;`` first, once.
* An anonymous enum nobody refers to is a top-level one (a set of
  constants) and is printed on its own.

A plan is a list of items, ``type id << 3 | op`` with op one of
:data:`STRUCT_DEF`, :data:`STRUCT_FWD`, :data:`TYPEDEF_DEF`,
:data:`ENUM_DEF`, :data:`FWD_DEF`; :mod:`btf.cdump.render` makes each
one's text.
"""

from __future__ import annotations

from array import array
from itertools import compress

from ..errors import BtfError
from .columns import (ARRAY, CONST, DATASEC, DECL_TAG, ENUM, ENUM64, FLOAT, FUNC, FUNC_PROTO, FWD, INT, MODS,
                      PTR, RESTRICT, STRUCT, TYPE_TAG, TYPEDEF, UNION, VAR, VOLATILE)

TYPE_CHECKING = False  # typing costs 2.7 ms to import; annotations are strings
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .columns import Columns

# What a plan item does with its type id (the low 3 bits of the item).
STRUCT_DEF, STRUCT_FWD, TYPEDEF_DEF, ENUM_DEF, FWD_DEF = range(5)

# Kinds the header never prints at top level: skipping them is libbpf's
# result too (they are "ordered" without queueing anything).
_NOT_DUMPED = frozenset((FUNC, VAR, DATASEC, DECL_TAG))

# Ordering and emitting states (libbpf keeps the same three of each).
_NOT, _DOING, _PENDING, _DONE = 0, 1, 2, 3  # _DONE the largest: min() of states tests all done
_IS_NOT = bytes(s == _NOT for s in range(256))  # translates states to 1 where _NOT


def plan(cols: Columns) -> list[int]:
    """What the header defines, in order: every type in id order, each after
    what it needs."""
    return Planner(cols).plan()


class Planner:
    """One run of the two walks over a whole spec (:meth:`plan` once)."""

    def __init__(self, cols: Columns) -> None:
        self.cols = cols
        n = cols.n
        self.order_state = bytearray(n)
        self.emit_state = bytearray(n)
        self.fwd_emitted = bytearray(n)
        self.order_state[0] = _DONE
        self.emit_state[0] = _DONE
        self._referenced_ids: set[int] | None = None
        self.items: list[int] = []
        self.queue: list[int] = []
        self.pending: list[int] = []  # see _plan
        self.order = self._ordering_walk()
        self.emit = self._emitting_walk()

    def plan(self) -> list[int]:
        """The items, ``id << 3 | op``."""
        try:
            return self._plan()
        except IndexError:
            # the walk indexes per-type state by the ids records name
            error = self._out_of_range()
            if error is None:
                raise
            raise error from None

    def _plan(self) -> list[int]:
        cols = self.cols
        items = self.items
        queue = self.queue
        order, emit = self.order, self.emit
        state, kinds, names_off = self.order_state, cols.kinds, cols.names_off
        # Kinds the header never prints count as done, so that the next id
        # to order is found by a search in C.
        state[:] = kinds.translate(bytes(_DONE if k in _NOT_DUMPED else _NOT for k in range(256)))
        state[0] = _DONE
        # libbpf prints an anonymous enum on its own only if no type refers
        # to it, which it learns from a scan of every reference first (a
        # function's return type is not one).  Here one met at the top level,
        # or as a return type, is printed there, in case, and stays _PENDING:
        # a type walked later that refers to it finds it so, and the print is
        # dropped at the end (types walked before would have met it already).
        # That leaves only the references the walk never follows.
        pending = self.pending
        st, words, offsets, infos = cols.st, cols.words, cols.offsets, cols.infos
        get = state.__getitem__
        # Every id the header may print, in order; one that an earlier walk
        # has reached is skipped by a test here (a search from id to id
        # costs more in its call than in its scan).  Picked lazily from all
        # the ids, in C: a list of the 70k would be 3 MB to fault in.
        for type_id in compress(range(len(state)), state.translate(_IS_NOT)):
            if state[type_id] != _NOT:
                continue
            k = kinds[type_id]
            if k == FUNC_PROTO:
                # Most ids the loop stops at are prototypes of functions
                # (25k of 57k in vmlinux) whose parameters are all done: the
                # order walk's first test, without a call into it.  (min()
                # with a default= takes a quarter longer: keywords are parsed.)
                p = offsets[type_id] + 4
                vlen = infos[type_id] & 0xFFFF
                if state[st[type_id]] == _DONE and (not vlen or min(map(get, words[p:p + 2 * vlen:2])) == _DONE):
                    state[type_id] = _DONE
                    continue
                order(type_id, False)
            elif k == PTR:
                target = st[type_id]
                if state[target] == _DONE or ((kinds[target] == STRUCT or kinds[target] == UNION)
                                              and names_off[target]):
                    state[type_id] = _DONE  # as order() would, pushing nothing
                    continue
                order(type_id, False)
            elif (k == ENUM or k == ENUM64) and not names_off[type_id]:
                state[type_id] = _PENDING
                pending.append(type_id)
                queue.append(type_id)
            else:
                order(type_id, False)
            if queue:
                for queued in queue:
                    emit(queued, 0)
                del queue[:]
        candidates = set(pending)
        unwalked: set[int] = set()  # the pending ones something refers to after all
        for column in self._unwalked_references():
            if column and max(column) >= cols.n:
                raise self._out_of_range()
            unwalked.update(candidates.intersection(column))
        dropped = {t << 3 | ENUM_DEF for t in pending if state[t] == _DONE or t in unwalked}
        if dropped:
            items[:] = [item for item in items if item not in dropped]
        return items

    # -- references the walks do not follow -------------------------------

    @property
    def referenced(self) -> set[int]:
        """Every id some other type refers to, as libbpf marks them before
        ordering (a function's return type does not count).  The plan needs
        it only for an anonymous forward declaration (malformed BTF), or to
        say which reference is out of range."""
        if self._referenced_ids is not None:
            return self._referenced_ids
        cols = self.cols
        words, offsets, infos, st, ids_of = cols.words, cols.offsets, cols.infos, cols.st, cols.ids_of
        refs = set(map(st.__getitem__, ids_of({VOLATILE, CONST, RESTRICT, PTR, TYPEDEF,
                                                FUNC, VAR, DECL_TAG, TYPE_TAG})))
        update = refs.update
        for type_id in ids_of({STRUCT, UNION}):
            p = offsets[type_id] + 4
            update(words[p:p + 3 * (infos[type_id] & 0xFFFF):3])
        for type_id in ids_of({DATASEC}):
            p = offsets[type_id] + 3
            update(words[p:p + 3 * (infos[type_id] & 0xFFFF):3])
        for type_id in ids_of({FUNC_PROTO}):
            update(cols.param_types(type_id))
        for type_id in ids_of({ARRAY}):
            p = offsets[type_id] + 3
            update(words[p:p + 2])
        self._referenced_ids = refs
        return refs

    def _out_of_range(self) -> BtfError | None:
        """The error for a type id past the last type, if some type names one."""
        n = self.cols.n
        returns = map(self.cols.st.__getitem__, self.cols.ids_of({FUNC_PROTO}))
        worst = max(max(self.referenced, default=0), max(returns, default=0))
        if worst >= n:
            return BtfError(f"a type refers to type id {worst}, past the last type ({n - 1})")
        return None

    def _unwalked_references(self) -> list[Sequence[int]]:
        """What the ordering walk never follows, as columns: the types of
        functions, variables, section entries and declaration tags (kinds
        the header does not print), and array index types.  (Arrays, not a
        set: only a few ids are looked for in them, and a set of 26k ids is
        2 MB to fault in.)"""
        cols = self.cols
        words, offsets, infos, st, kinds = cols.words, cols.offsets, cols.infos, cols.st, cols.kinds
        columns: list[Sequence[int]] = [
            array("I", compress(st, kinds.translate(bytes(k in (FUNC, VAR, DECL_TAG) for k in range(256)))))]
        for type_id in cols.ids_of({DATASEC}):
            p = offsets[type_id] + 3
            columns.append(words[p:p + 3 * (infos[type_id] & 0xFFFF):3])
        columns.append(array("I", map(cols.array_index, cols.ids_of({ARRAY}))))
        return columns

    # -- ordering ---------------------------------------------------------

    def _ordering_walk(self) -> Callable[[int, bool], int]:
        """libbpf's ordering walk, as a closure over the columns it reads:
        it runs ~100k times, and cell loads cost less than attribute loads
        on ``self``.  Bound to ``self.order`` by the constructor."""
        cols = self.cols
        state, kinds, st, names_off = self.order_state, cols.kinds, cols.st, cols.names_off
        words, offsets, infos = cols.words, cols.offsets, cols.infos
        push = self.queue.append
        pending = self.pending.append
        get = state.__getitem__
        planner = self

        def order(type_id: int, through_ptr: bool) -> int:
            """Queue the named definitions ``type_id`` needs, dependencies first.

            Returns 1 when the link to it is strong (it must be fully
            defined before its user), 0 when a forward declaration would do.
            Qualifiers, arrays and prototypes carry no state of their own in
            libbpf; once everything under one is done it answers 1 forever,
            so we mark it done to skip the walk next time.  Callers test
            ``_DONE`` themselves before calling (a done type answers 1): a
            third of the calls were for ``int`` and ``void``.
            """
            s = state[type_id]
            if s == _DONE:
                return 1
            k = kinds[type_id]
            if s == _PENDING:  # an anonymous enum met at the top level: referenced after all
                state[type_id] = _DONE
                return 1
            if s == _DOING:
                if (k == STRUCT or k == UNION) and through_ptr and names_off[type_id]:
                    return 0
                raise BtfError(f"unsatisfiable type cycle through type {type_id}")
            if k == FUNC_PROTO:
                # Most prototypes only use types that are done by the time they
                # are reached: one test in C then, and no walk.
                ret = st[type_id]
                p = offsets[type_id] + 4
                ptypes = words[p:p + 2 * (infos[type_id] & 0xFFFF):2]
                if state[ret] == _DONE and (not ptypes or min(map(get, ptypes)) == _DONE):
                    state[type_id] = _DONE
                    return 1
                s = state[ret]
                if s >= _PENDING:
                    strong = True
                elif s == _NOT and (kinds[ret] == ENUM or kinds[ret] == ENUM64) and not names_off[ret]:
                    # libbpf does not count a return type as a reference: an
                    # anonymous enum met here is as if met at the top level
                    state[ret] = _PENDING
                    pending(ret)
                    push(ret)
                    strong = True
                else:
                    strong = order(ret, through_ptr) > 0
                for ptype in ptypes:
                    if state[ptype] == _DONE or order(ptype, through_ptr):
                        strong = True
                if state[ret] >= _PENDING and (not ptypes or min(map(get, ptypes)) == _DONE):
                    state[type_id] = _DONE
                return int(strong)
            if k == PTR:
                target = st[type_id]
                if state[target] == _DONE:
                    strong = 1
                elif (kinds[target] == STRUCT or kinds[target] == UNION) and names_off[target]:
                    strong = 0  # a named record through a pointer: a declaration will do
                else:
                    strong = order(target, True)
                state[type_id] = _DONE
                return strong
            if k == STRUCT or k == UNION:
                named = names_off[type_id] != 0
                if through_ptr and named:
                    return 0
                state[type_id] = _DOING
                p = offsets[type_id] + 4
                for mtype in words[p:p + 3 * (infos[type_id] & 0xFFFF):3]:
                    if state[mtype] != _DONE:
                        order(mtype, False)
                if named:
                    push(type_id)
                state[type_id] = _DONE
                return 1
            if k == TYPEDEF:
                target = st[type_id]
                strong = 1 if state[target] == _DONE else order(target, through_ptr)
                if through_ptr and not strong:
                    return 0
                push(type_id)
                state[type_id] = _DONE
                return 1
            if k in MODS:
                target = st[type_id]
                if state[target] == _DONE:
                    state[type_id] = _DONE
                    return 1
                strong = order(target, through_ptr)
                if state[target] == _DONE:
                    state[type_id] = _DONE
                return strong
            if k == ARRAY:
                target = words[offsets[type_id] + 3]
                if state[target] == _DONE:
                    state[type_id] = _DONE
                    return 1
                strong = order(target, False)
                if state[target] == _DONE:
                    state[type_id] = _DONE
                return strong
            if k == ENUM or k == ENUM64 or k == FWD:
                # Met through a reference, an anonymous enum is printed inline
                # (the plan's loop handles one met first at the top level).
                if names_off[type_id] or (k == FWD and type_id not in planner.referenced):
                    push(type_id)
                state[type_id] = _DONE
                return 1
            if k == INT or k == FLOAT:
                state[type_id] = _DONE
                return 0
            if k in _NOT_DUMPED:
                state[type_id] = _DONE
                return 0
            raise BtfError(f"type {type_id}: unknown kind {k}")

        return order

    # -- emitting ---------------------------------------------------------

    def _emitting_walk(self) -> Callable[[int, int], None]:
        """libbpf's emitting walk, a closure like :meth:`_ordering_walk`;
        bound to ``self.emit`` by the constructor."""
        cols = self.cols
        es, kinds, st, names_off = self.emit_state, cols.kinds, cols.st, cols.names_off
        words, offsets, infos = cols.words, cols.offsets, cols.infos
        fwd_emitted = self.fwd_emitted
        push = self.items.append
        get = es.__getitem__
        name_of = cols.name_of
        # Anonymous types are walked again at every use, as in libbpf; a DAG of
        # them in bad BTF would make that exponential.  vmlinux needs ~0.3
        # calls per type.
        budget = 16 * cols.n + 100_000

        def typedef_def(type_id: int) -> None:
            # ``__builtin_va_list`` is the compiler's own: never redefined
            if name_of(type_id) != "__builtin_va_list":
                push(type_id << 3 | TYPEDEF_DEF)

        def emit(type_id: int, cont_id: int) -> None:
            """Print ``type_id``'s definition, or what its user needs of it.

            ``cont_id`` is the struct being defined (0 at top level): a struct
            that refers to itself needs no forward declaration.  As in
            ``order``, a qualifier, pointer or array over a done type is
            itself done.
            """
            nonlocal budget
            s = es[type_id]
            if s == _DONE:
                return
            budget -= 1
            if budget < 0:
                raise BtfError("anonymous types nest too widely to print (malformed BTF?)")
            k = kinds[type_id]
            if s == _DOING:
                if fwd_emitted[type_id]:
                    return
                if k == STRUCT or k == UNION:
                    if type_id == cont_id or not names_off[type_id]:
                        return
                    push(type_id << 3 | STRUCT_FWD)
                    fwd_emitted[type_id] = 1
                elif k == TYPEDEF:
                    typedef_def(type_id)
                    fwd_emitted[type_id] = 1
                return
            if k == PTR or k in MODS or k == ARRAY:
                # done once what it points to, qualifies or holds is done
                target = st[type_id] if k != ARRAY else words[offsets[type_id] + 3]
                if es[target] != _DONE:
                    emit(target, cont_id)
                    if es[target] != _DONE:
                        return
                es[type_id] = _DONE
            elif k == STRUCT or k == UNION:
                es[type_id] = _DOING
                named = names_off[type_id] != 0
                if cont_id == 0 or not named:
                    inner = type_id if named else cont_id
                    p = offsets[type_id] + 4
                    for mtype in words[p:p + 3 * (infos[type_id] & 0xFFFF):3]:
                        if es[mtype] != _DONE:
                            emit(mtype, inner)
                elif not fwd_emitted[type_id] and type_id != cont_id:
                    push(type_id << 3 | STRUCT_FWD)
                    fwd_emitted[type_id] = 1
                if cont_id == 0:
                    push(type_id << 3 | STRUCT_DEF)
                    es[type_id] = _DONE
                else:
                    es[type_id] = _NOT
            elif k == TYPEDEF:
                es[type_id] = _DOING
                target = st[type_id]
                if es[target] != _DONE:
                    emit(target, type_id)
                if not fwd_emitted[type_id]:
                    typedef_def(type_id)
                es[type_id] = _DONE
            elif k == ENUM or k == ENUM64:
                if cont_id == 0:
                    push(type_id << 3 | ENUM_DEF)
                es[type_id] = _DONE
            elif k == FWD:
                push(type_id << 3 | FWD_DEF)
                es[type_id] = _DONE
            elif k == FUNC_PROTO:
                p = offsets[type_id] + 4
                parts = words[p:p + 2 * (infos[type_id] & 0xFFFF):2]
                parts.insert(0, st[type_id])  # the return type first, as libbpf
                if min(map(get, parts)) != _DONE:
                    for part in parts:
                        if es[part] != _DONE:
                            emit(part, cont_id)
                    if min(map(get, parts)) != _DONE:
                        return
                es[type_id] = _DONE
            elif k == INT:
                es[type_id] = _DONE

        return emit
