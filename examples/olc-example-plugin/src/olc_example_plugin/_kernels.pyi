# Type stub of the native module built from csrc/module.cc.
from typing import Any

ABI_VERSION: int

def scaled_softsign_vtable() -> Any: ...
