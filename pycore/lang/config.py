"""bpftrace's config variables: the script's ``config = { ... }`` block (0.20) and the ``BPFTRACE_*``
environment, read as bpftrace 0.23.2 reads them.

Which source wins is 0.23.2's: the environment is read first, and a variable it set cannot be set
again, so an environment variable wins over the config block; within each source the first setting
wins (``BPFTRACE_MAX_MAP_KEYS`` over the deprecated ``BPFTRACE_MAP_KEYS_MAX``, the first of two
``max_map_keys =`` lines). A name is the variable's (``max_map_keys``), its upper case, or its
environment name (``BPFTRACE_MAX_MAP_KEYS``). 0.23.2 reads only some variables from the environment
(not ``missing_probes``, ``print_maps_on_exit``, ``on_stack_limit``, ``probe_inline``,
``symbol_source``): neither does pycore.

What pycore does with each: ``max_map_keys`` sizes the maps, ``max_strlen`` the strings ``str()``
reads, ``missing_probes`` says what a missing function of a block with several attach points is (an
error, a warning, nothing), ``print_maps_on_exit`` whether the maps are printed at the end,
``stack_mode`` how ``kstack``/``ustack`` print; ``cpp_demangle`` turns C++ names in user stacks off.
The others tune bpftrace's own machinery (its LLVM, its perf buffers, its symbol caches) and are
checked, then have no effect, as pycore has no such machinery. Values a later bpftrace accepts and
0.23.2 refuses (``missing_probes = ignore`` unquoted, ``stack_mode = "perf"`` quoted, upstream's
``license`` and ``unstable_*`` variables) are accepted.
"""

from __future__ import annotations

import re

from pycore.lang import ast as A
from pycore.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["Config", "ConfigError", "read_config", "STACK_MODES", "MAX_STRLEN"]

STACK_MODES = ("bpftrace", "perf", "raw")
MAX_STRLEN = 4096    # the longest string pycore builds in its scratch area, 32 KiB at most (bpftrace has no limit)


class ConfigError(Exception):
    """A bad environment variable: one line, as bpftrace 0.23.2 words it."""


@record
class Config:
    """The variables pycore honours, and every other one as set (name -> value)."""

    max_map_keys: int = 4096
    max_strlen: int = 1024    # 0.23's default (0.17's was 64): docs/trace.md says what it costs
    missing_probes: str = "warn"
    print_maps_on_exit: bool = True
    stack_mode: str = "bpftrace"
    cpp_demangle: bool = True
    others: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)       # lines for stderr (deprecated names)


# name -> kind, as 0.23.2's CONFIG_KEY_MAP (and upstream's later names, accepted)
_KINDS: dict[str, str] = {
    "cache_user_symbols": "cache", "cpp_demangle": "bool", "lazy_symbolication": "bool", "log_size": "int",
    "max_bpf_progs": "int", "max_cat_bytes": "int", "max_map_keys": "int", "max_probes": "int",
    "max_strlen": "int", "max_type_res_iterations": "int", "on_stack_limit": "int", "perf_rb_pages": "int",
    "probe_inline": "bool", "stack_mode": "stack_mode", "str_trunc_trailer": "string",
    "symbol_source": "symbol_source", "missing_probes": "missing_probes", "print_maps_on_exit": "bool",
    "use_blazesym": "bool",
    # upstream's, after 0.23
    "license": "license", "show_debug_info": "bool", "unstable_import": "unstable", "unstable_tseries": "unstable",
    "unstable_typeinfo": "unstable", "unstable_dw_ustack": "unstable", "unstable_macro": "unstable",
    "unstable_map_decl": "unstable",
}
_ENV_ONLY = ("btf", "debug_output", "kernel_build", "kernel_source", "max_ast_nodes", "verify_llvm_ir", "vmlinux")
_LICENSES = ("GPL", "GPL v2", "GPL and additional rights", "Dual BSD/GPL", "Dual MIT/GPL", "Dual MPL/GPL")

# the environment as 0.23.2's parse_env reads it, in its order: (variable, config name, kind, deprecated for)
_ENV: tuple[tuple[str, str, str, str], ...] = (
    ("BPFTRACE_MAX_STRLEN", "max_strlen", "uint", ""),
    ("BPFTRACE_STRLEN", "max_strlen", "uint", "BPFTRACE_MAX_STRLEN"),
    ("BPFTRACE_STR_TRUNC_TRAILER", "str_trunc_trailer", "string", ""),
    ("BPFTRACE_CPP_DEMANGLE", "cpp_demangle", "bool", ""),
    ("BPFTRACE_DEBUG_OUTPUT", "", "bool", ""),
    ("BPFTRACE_LAZY_SYMBOLICATION", "lazy_symbolication", "bool", ""),
    ("BPFTRACE_MAX_MAP_KEYS", "max_map_keys", "uint", ""),
    ("BPFTRACE_MAX_PROBES", "max_probes", "uint", ""),
    ("BPFTRACE_MAX_BPF_PROGS", "max_bpf_progs", "uint", ""),
    ("BPFTRACE_LOG_SIZE", "log_size", "uint", ""),
    ("BPFTRACE_PERF_RB_PAGES", "perf_rb_pages", "uint", ""),
    ("BPFTRACE_MAX_TYPE_RES_ITERATIONS", "max_type_res_iterations", "uint", ""),
    ("BPFTRACE_MAX_CAT_BYTES", "max_cat_bytes", "uint", ""),
    ("BPFTRACE_CACHE_USER_SYMBOLS", "cache_user_symbols", "cache", ""),
    ("BPFTRACE_MAX_AST_NODES", "", "uint", ""),
    ("BPFTRACE_STACK_MODE", "stack_mode", "stack_mode", ""),
    ("BPFTRACE_NO_CPP_DEMANGLE", "cpp_demangle", "not", "BPFTRACE_CPP_DEMANGLE=0"),
    ("BPFTRACE_CAT_BYTES_MAX", "max_cat_bytes", "uint", "BPFTRACE_MAX_CAT_BYTES"),
    ("BPFTRACE_MAP_KEYS_MAX", "max_map_keys", "uint", "BPFTRACE_MAX_MAP_KEYS"),
    ("BPFTRACE_USE_BLAZESYM", "use_blazesym", "bool", ""),
)

_HONOURED = ("max_map_keys", "max_strlen", "missing_probes", "print_maps_on_exit", "stack_mode", "cpp_demangle")
_UINT = re.compile(r"\s*\+?(\d+)")     # what C++'s istream >> uint64_t takes: the leading digits


def read_config(program: A.Program, environ: Mapping[str, str] | None,
                error: Callable[[A.Node, str], Exception]) -> Config:
    """The config of ``program`` under ``environ`` (None: no environment, as ``pycore.trace()``).

    A bad config block is ``error(node, message)`` raised at its place; a bad environment variable a
    :class:`ConfigError`."""
    cfg = Config()
    from_env: set[str] = set()
    for var, name, kind, new in _ENV if environ is not None else ():
        raw = environ.get(var)
        if raw is None:
            continue
        if kind == "uint":
            m = _UINT.match(raw)
            if m is None or (name == "max_map_keys" and int(m.group(1)) == 0):
                raise ConfigError(f"Env var '{var}' did not contain a valid uint64_t, or was zero-valued.")
            if name == "max_strlen" and not 1 <= int(m.group(1)) <= MAX_STRLEN:
                raise ConfigError(f"{var}={raw}: pycore trace holds strings of 1 to {MAX_STRLEN} bytes")
            value: object = int(m.group(1))
        elif kind in ("bool", "not"):
            if raw not in ("0", "1"):
                raise ConfigError(f"Env var '{var}' did not contain a valid value (0 or 1).")
            value = (raw == "1") != (kind == "not")
        elif kind == "stack_mode":
            if raw not in STACK_MODES:
                raise ConfigError(f"{raw} is not a valid StackMode")
            value = raw
        elif kind == "cache":
            if raw not in ("PER_PID", "PER_PROGRAM", "NONE", "0", "1"):
                raise ConfigError("Invalid value for cache_user_symbols: valid values are PER_PID, PER_PROGRAM, "
                                  "and NONE.")
            value = raw
        else:
            value = raw
        if new:     # after the value is read, as 0.23.2 warns
            cfg.warnings.append(f"WARNING: {var} is deprecated. Use {new} instead.")
        if name and name not in from_env:
            from_env.add(name)
            _set(cfg, name, value)
    from_script: set[str] = set()
    for a in program.config:
        name, value = _script_value(a, error)
        if name not in from_env and name not in from_script:
            from_script.add(name)
            _set(cfg, name, value)
    return cfg


def _set(cfg: Config, name: str, value: object) -> None:
    if name in _HONOURED:
        setattr(cfg, name, value)
    else:
        cfg.others[name] = value


def _script_value(a: A.ConfigAssign, error: Callable[[A.Node, str], Exception]) -> tuple[str, object]:
    """One ``name = value`` of the block: the variable's name and its value, or bpftrace's error."""
    raw = a.name
    name = raw.lower()
    if name.startswith("bpftrace_"):
        name = name[len("bpftrace_"):]
    if name in _ENV_ONLY:
        raise error(a, f"{name} can only be set as an environment variable")
    kind = _KINDS.get(name)
    if kind is None:
        raise error(a, f"Unrecognized config variable: {raw}")
    v = a.value
    if isinstance(v, A.Int):
        given, text = "int", str(v.value)
    elif isinstance(v, A.Str):
        given, text = "string", v.value
    elif isinstance(v, A.Builtin):      # a bare name: missing_probes = ignore, stack_mode = perf
        given, text = "name", v.name
    else:
        raise error(a, f"Assignment for {raw} must be literal.")
    if kind in ("int", "bool") and given == "name" and text.lower() not in ("true", "false"):
        raise error(a, f"Assignment for {raw} must be literal.")     # 0.23.2's words for a bare name
    if kind == "int":
        if given != "int":
            raise error(a, f"Invalid type for {raw}. Type: string. Expected Type: int")
        if name == "max_map_keys" and v.value == 0:
            raise error(v, "max_map_keys = 0: a map holds at least one key")
        if name == "max_strlen" and not 1 <= v.value <= MAX_STRLEN:
            raise error(v, f"max_strlen = {v.value}: pycore trace holds strings of 1 to {MAX_STRLEN} bytes")
        return name, v.value
    if kind == "bool":
        if given == "int" and v.value in (0, 1):
            return name, bool(v.value)
        if given == "int":
            raise error(v, f"Invalid value for {raw}. Needs to be 0 or 1. Value: {v.value}")
        if text.lower() in ("true", "false"):       # upstream's spelling, after 0.23
            return name, text.lower() == "true"
        raise error(a, f"Invalid type for {raw}. Type: string. Expected Type: int")
    if given == "int" and kind != "unstable":
        expected = "stack_mode" if kind == "stack_mode" else "string"
        raise error(a, f"Invalid type for {raw}. Type: int. Expected Type: {expected}")
    if kind == "stack_mode":
        if text not in STACK_MODES:     # 0.23.2 lexes only its three modes as such: any other name is no literal
            raise error(a, f"Assignment for {raw} must be literal." if given == "name" else
                        f"Unknown stack mode: '{text}'")
        return name, text
    if kind == "missing_probes":
        if text.lower() not in ("ignore", "warn", "error"):
            raise error(v, 'Invalid value for missing_probes: valid values are "ignore", "warn", and "error".')
        return name, text.lower()
    if kind == "cache":
        if text not in ("PER_PID", "PER_PROGRAM", "NONE"):
            raise error(v, "Invalid value for cache_user_symbols: valid values are PER_PID, PER_PROGRAM, and NONE.")
        return name, text
    if kind == "symbol_source":
        if text not in ("dwarf", "symbol_table"):
            raise error(v, 'Invalid value for symbol_source: valid values are "dwarf" and "symbol_table".')
        return name, text
    if kind == "license":
        if text not in _LICENSES:
            raise error(v, f"Invalid value for license. Found: {text}. Valid values: {', '.join(_LICENSES)}")
        return name, text
    if kind == "unstable":
        word = text.lower() if given != "int" else ("enable" if v.value else "error")
        if word in ("1", "true"):
            word = "enable"
        elif word in ("0", "false"):
            word = "error"
        if word not in ("enable", "warn", "error"):
            raise error(v, "Invalid value for unstable config: valid values are enable, warn, and error.")
        return name, word
    return name, text
