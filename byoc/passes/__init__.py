"""The partitioning passes, each a plain function of an IRModule (TVM's BYOC flow):

    infer_types -> merge_composite -> annotate_target (or annotate_range)
      -> merge_compiler_regions -> partition_graph -> reject_regions

Every pass that works on regions reads them from the compiler_begin/compiler_end annotations
(``byoc.analysis.find_regions``) and writes them back the same way, so each can be tested on
modules annotated by hand. ``byoc.partition`` chains their cores without re-reading markers.
"""

from ..analysis.annotation import compiler_begin, compiler_end
from .annotate import annotate_target
from .annotate_range import node_order
from .infer_types import infer_types
from .merge import merge_compiler_regions
from .merge_composite import merge_composite
from .partition_graph import partition_graph, region_name
from .reject import reject_regions

__all__ = ["annotate_target", "compiler_begin", "compiler_end", "infer_types",
           "merge_compiler_regions", "merge_composite", "node_order", "partition_graph",
           "region_name", "reject_regions"]
