-- post_verification.lua: wrk script for bench/api/run.sh.  Each request posts
-- the healthy control's verification rows (docs/interfaces.md section 3; the control
-- of MTPLX issue 306, as in tests/e2e/test_verdict.sh) to
-- POST /v1/artifacts/{id}/verifications, the id drawn uniformly from
-- 1..ARTIFACTS so the writes spread over the whole catalog.
-- Environment: FORGED_TOKEN (a write token), ARTIFACTS (default 100000).

local token = os.getenv("FORGED_TOKEN") or ""
local artifacts = tonumber(os.getenv("ARTIFACTS") or "100000")
local body = '{"schema": "forged.verification.v1", "hardware": "M4 Max", "runtime": "mtplx-2.12",' ..
	' "rows": [{"depth": 0, "tok_s": 15.04},' ..
	' {"depth": 1, "tok_s": 34.15584, "acceptance": [0.978], "quality_passed": true},' ..
	' {"depth": 2, "tok_s": 42.112, "acceptance": [0.978, 0.95], "quality_passed": true},' ..
	' {"depth": 3, "tok_s": 47.2256, "acceptance": [0.978, 0.95, 0.93], "quality_passed": true}]}'
local headers = { ["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json" }

-- Each wrk thread has its own Lua state: seed each differently.
function setup(thread)
	thread:set("seed", math.random(1, 2 ^ 30))
end

function init(args)
	math.randomseed(seed or os.time())
end

function request()
	return wrk.format("POST", "/v1/artifacts/" .. math.random(1, artifacts) .. "/verifications", headers, body)
end
