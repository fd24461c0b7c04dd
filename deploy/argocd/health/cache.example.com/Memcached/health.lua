-- Argo CD health of a cache.example.com/Memcached, from the conditions the
-- operator writes, in Argo CD's layout beside its cases (health_test.yaml).
-- Installed as argocd-cm key
-- resource.customizations.health.cache.example.com_Memcached.
local hs = {}

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end

-- A status written for an older spec says nothing about the current one.
if obj.metadata.generation ~= nil and (obj.status.observedGeneration == nil or obj.status.observedGeneration < obj.metadata.generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. obj.metadata.generation
  return hs
end

local ready = nil
for _, c in ipairs(obj.status.conditions) do
  -- Stalled: the operator cannot progress until the spec or the cluster
  -- changes (a rejected object, a missing permission, refused pods).
  if (c.type == "Degraded" or c.type == "Stalled") and c.status == "True" then
    hs.status = "Degraded"
    hs.message = c.reason .. ": " .. c.message
    return hs
  end
  if c.type == "Ready" then
    ready = c
  end
end

if obj.spec ~= nil and obj.spec.paused == true then
  hs.status = "Suspended"
  hs.message = "spec.paused is true: the operator leaves the cache as it is"
  return hs
end

if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Ready condition"
elseif ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message
else
  hs.status = "Progressing"
  hs.message = ready.reason .. ": " .. ready.message
end
return hs
