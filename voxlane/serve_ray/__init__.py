"""Scale-out on Ray Serve: many engine replicas, on many machines, behind one OpenAI-compatible endpoint
(``voxlane serve --ray-address``; docs/scale-out.md). Needs the ``ray`` extra: ``pip install 'voxlane[ray]'``.

- ``deploy.py``: the two deployments (engine replicas, HTTP ingress) and the command that deploys them
- ``replica.py``: ``EngineReplica``, one engine replica: a local engine process and its ``EngineClient``
- ``client.py``: ``RayEngineClient``, the ingress's engine client, calling the replicas through Ray
"""
