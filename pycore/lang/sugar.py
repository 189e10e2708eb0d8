"""Later bpftraces' spellings of what the tree already says, rewritten to it before the checker runs.

bpftrace 0.24 lets every builtin be called like a function (``comm()``, ``pid()``), names the pid
namespace (``pid(curr_ns)``, ``pid(init)``), and its standard library has ``ppid`` and ``pcomm``
(0.24: ``ppid(task)``, 0.25: bare ``ppid``), which are ``task->real_parent->pid`` and ``->comm``
(the thread that forked the task: its tid, not its process's pid), ``leader_tid`` and ``leader_comm``
(0.26: ``task->group_leader->pid`` and ``->comm``), and
``container_of(ptr, type, member)`` (0.26+), a cast of ``ptr`` less the member's offset.
These are the same programs as the plain forms, so they are rewritten to them here, with each new
node at the place of the text it stands for (errors point there), and the checker and the lowering
never see them. The rewrite needs no BTF and no machine, so it is a function of the tree alone.
"""

from __future__ import annotations

from pycore.lang import ast as A
from pycore.record import record_fields

__all__ = ["desugar"]

#: Builtins that 0.24 also takes with a call's empty parentheses (kstack/ustack are functions already).
_CALLABLE = frozenset({"pid", "tid", "uid", "gid", "username", "comm", "nsecs", "elapsed", "cpu", "numaid",
                       "cgroup", "rand", "jiffies", "curtask", "func", "probe", "cpid", "ncpus", "usermode",
                       "retval", "probetype", "has_cpid"})

#: What each of the standard library's task macros reads: (the task's pointer, its field), as
#: upstream's stdlib/base.bt (``task.real_parent.pid``; 0.24's first ``ppid`` read ``->pid`` too).
_TASK = {"ppid": ("real_parent", "pid"), "pcomm": ("real_parent", "comm"),
         "leader_tid": ("group_leader", "pid"), "leader_comm": ("group_leader", "comm")}


def desugar(program: A.Program) -> A.Program:
    """``program`` with later bpftraces' spellings of builtins rewritten to the plain ones (a new tree
    where anything changed; the parser's tree, kept in its cache, is not touched)."""
    return _rewrite(program)   # type: ignore[return-value]


def _rewrite(node: A.Node) -> A.Node:
    new = _replace(node)
    if new is not None:
        return new
    changed: dict[str, object] = {}
    for name in record_fields(type(node)):
        if name == "pos":
            continue
        value = getattr(node, name)
        if isinstance(value, A.Node):
            r = _rewrite(value)
            if r is not value:
                changed[name] = r
        elif isinstance(value, (list, tuple)) and any(isinstance(v, A.Node) for v in value):
            items = [_rewrite(v) if isinstance(v, A.Node) else v for v in value]
            if any(a is not b for a, b in zip(items, value)):
                changed[name] = type(value)(items)
    if not changed:
        return node
    fields = {n: changed.get(n, getattr(node, n)) for n in record_fields(type(node)) if n != "pos"}
    return type(node)(**fields, pos=node.pos)


def _replace(node: A.Node) -> A.Node | None:
    """The plain form of one node, or None when it is plain already."""
    if isinstance(node, A.Builtin) and node.name in _TASK:
        return _task(A.Builtin("curtask", pos=node.pos), node.name, node.pos)
    if not isinstance(node, A.Call):
        return None
    name, args = node.name, node.args
    if name in _TASK and len(args) <= 1 and all(isinstance(a, A.Expr) for a in args):
        task = _rewrite(args[0]) if args else A.Builtin("curtask", pos=node.pos)
        return _task(task, name, node.pos)   # type: ignore[arg-type]
    if name in _CALLABLE and not args:
        return A.Builtin(name, pos=node.pos)
    if name == "container_of" and len(args) == 3 and isinstance(args[0], A.Expr) \
            and _type_name(args[1]) is not None:
        # the standard library's macro (bpftrace 0.26+): (type *)((void *)ptr - offsetof(type, member))
        ptr, kind, member = args
        void = A.Cast(A.TypeName("void", 1, pos=ptr.pos), _rewrite(ptr), pos=ptr.pos)   # type: ignore[arg-type]
        back = A.Binary("-", void, A.Call("offsetof", [kind, member], pos=node.pos), pos=node.pos)
        return A.Cast(A.TypeName(_type_name(kind), 1, pos=node.pos), back, pos=node.pos)  # type: ignore[arg-type]
    if name in ("pid", "tid") and len(args) == 1 and isinstance(args[0], A.Builtin) \
            and (args[0].name == "init" or (args[0].name == "curr_ns" and _initial_pid_namespace())):
        return A.Builtin(name, pos=node.pos)     # pycore's pid and tid are the initial namespace's
    return None


def _type_name(node: A.Node) -> str | None:
    """A call's type argument: ``struct foo`` or a typedef's name (None: not a type)."""
    if isinstance(node, A.TypeName) and not node.pointer_depth:
        return node.name
    if isinstance(node, A.Builtin):
        return node.name
    return None


def _initial_pid_namespace() -> bool:
    """Whether pycore runs in the initial pid namespace, where ``curr_ns`` and ``init`` agree (its
    inode is the kernel's constant PROC_PID_INIT_INO)."""
    import os

    try:
        return os.stat("/proc/self/ns/pid").st_ino == 0xEFFFFFFC
    except OSError:
        return False


def _task(task: A.Expr, name: str, pos: A.Pos) -> A.Expr:
    via, field = _TASK[name]
    return A.Field(A.Field(task, via, arrow=True, pos=pos), field, arrow=True, pos=pos)
