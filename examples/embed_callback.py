"""Any CO-RE object, not only the built-in tools: load, attach, poll with a callback.

Loads the fget-crack BPF object by hand (the same .bpf.o the tool uses),
sets its .rodata before load, attaches the tp_btf program, and counts events
in a callback.  Run as root: .venv/bin/python examples/embed_callback.py
"""

import os
import tempfile

from pycore.native.object import BpfObject
from pycore.native.shipped import object_path
from pycore.native.ringbuf import RingBuffer

seen = []

with BpfObject(object_path("fget_crack")) as obj:
    for prog in obj.programs.values():          # load only the program we attach
        prog.autoload = prog.name == "sys_exit_fd"
    obj.globals["targ_tgid"] = os.getpid()      # const volatile: set before load
    obj.globals["pattern"] = "callback-demo"
    obj.globals["pattern_len"] = len("callback-demo")
    obj.load()
    obj.programs["sys_exit_fd"].attach()        # tp_btf/sys_exit
    with RingBuffer(obj, "events", event="fget_event") as rb:
        with tempfile.TemporaryDirectory() as d:
            for i in range(3):
                os.close(os.open(os.path.join(d, f"callback-demo-{i}"), os.O_CREAT | os.O_RDWR, 0o600))
        while rb.poll(lambda ev: seen.append(ev.name), timeout=0.5):
            pass
print("events:", len(seen), sorted(seen))
